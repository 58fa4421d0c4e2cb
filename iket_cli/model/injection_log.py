"""What IKET's injection library says it lost: its log lines, read into losses.

The library (run-iket's ``libiket_injection.so``) logs through spdlog, to
``iket/pid_<hex>/iket.injection.log`` under run-iket and to the process's stderr in an
in-process session. Its messages of lost data are logged at ``warn`` or ``info`` (most are
not written at run-iket's default level, ``error``); one more, ``IKET profiling operation
failed with CUDA error ...``, goes to the workload's own output whatever the level. The
messages below are the library's own strings; a line is matched wherever it carries one, so
the logger's prefix (``[IketInjectionManager] [warning]``) does not matter.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import jsonio
from .completeness import (
    BUDGET,
    CUDA_GRAPH,
    LAUNCHES,
    NESTED_GRAPH,
    NO_TRACE_DATA,
    READBACK,
    RECORDS,
    UNKNOWN,
    UNREAD_MODULE,
)

#: The injection's log file in each process folder of a pass (run-iket's name), and the
#: pass's configuration beside those folders (its ``logLevel``).
LOG_FILE = "iket.injection.log"
CONFIG_FILE = "iket.config.json"
#: Read at most this much of a log (a damaged or runaway log is not read whole).
MAX_BYTES = 16 << 20


@dataclass(frozen=True)
class Said:
    """One loss the library reported: its cause, what it took, and what the line names."""

    cause: str
    lost: str
    text: str  # the library's sentence, as logged
    kernel: str | None = None
    records: int | None = None  # warp records dropped
    budget: int | None = None  # the maxTsCntPerWarp it had


#: The library's messages of lost data, most specific first: (pattern, cause, what it takes).
_GRAPH_NESTED = r"IKET does not currently profile kernels nested in child or conditional CUDA Graph nodes"
_BUDGET = (
    r"Trace incomplete: (?P<records>\d+) warp record\(s\) dropped because the warp emitted more events "
    r"than maxTsCntPerWarp=(?P<budget>\d+) allows => kernel: (?P<kernel>.+?)\. Raise maxTsCntPerWarp"
)
_READBACK = (
    r"IKET could not finish pending trace-data copies within \S+s while releasing CUDA context \S+; "
    r"remaining trace data will be dropped"
)
_TABLE = (
    (_BUDGET, BUDGET, RECORDS),
    (_GRAPH_NESTED, NESTED_GRAPH, LAUNCHES),
    (r'IKET could not generate trace data for CUDA Graph kernel "(?P<kernel>.*)"', CUDA_GRAPH, LAUNCHES),
    (r"IKET (?:cannot|could not|does not)[^.]*CUDA Graph[^.]*", CUDA_GRAPH, LAUNCHES),
    (r"IKET could not read a loaded CUDA module; its kernels are left uninstrum", UNREAD_MODULE, LAUNCHES),
    (r'IKET could not generate trace data for CUDA kernel "(?P<kernel>.*)"', NO_TRACE_DATA, LAUNCHES),
    (r"IKET could not capture trace data for kernel (?P<kernel>\S+?)\.?$", NO_TRACE_DATA, LAUNCHES),
    (_READBACK, READBACK, LAUNCHES),
    (
        r"IKET could not (?:collect|schedule)[^.;]* trace(?:-data)? (?:data|collection)[^.]*",
        READBACK,
        LAUNCHES,
    ),
    (r"IKET could not verify trace-data copy completion[^.]*", READBACK, LAUNCHES),
    (r"IKET encountered unsupported CUDA kernel parameters[^.]*", UNKNOWN, RECORDS),
)
_MESSAGES = tuple((re.compile(pattern), cause, lost) for pattern, cause, lost in _TABLE)
#: Printed by the library into the workload's output (any level): a CUDA call it wraps
#: failed; seen once per launch of a kernel in a CUDA graph (error 0001, "invalid argument").
OPERATION_FAILED = re.compile(
    r'IKET profiling operation failed with CUDA error (?P<code>\d+) \("(?P<what>[^"]*)"\)'
)
#: Modules the library skipped at start (cuBLAS's, a bf16 GEMM's): not a loss of instrumented
#: data by itself (the user's kernels are not in them), counted and said.
SKIPPED_MODULE = "IKET could not inspect a CUDA module for instrumentation; the module will be skipped"


def said(line: str) -> Said | None:
    """The loss one log line reports, if it reports one."""
    for pattern, cause, lost in _MESSAGES:
        found = pattern.search(line)
        if found is None:
            continue
        groups = found.groupdict()
        return Said(
            cause,
            lost,
            found.group(0).strip(),
            kernel=groups.get("kernel"),
            records=int(groups["records"]) if groups.get("records") else None,
            budget=int(groups["budget"]) if groups.get("budget") else None,
        )
    return None


@dataclass
class LogReading:
    """What a pass's injection logs say: its losses, the operations that failed (by CUDA error)
    and the modules skipped."""

    losses: list[Said]
    failed_operations: Counter
    skipped_modules: int = 0


def read_lines(lines: list[str]) -> LogReading:
    """The losses, failed operations and skipped modules that ``lines`` report."""
    found = LogReading([], Counter())
    for line in lines:
        failed = OPERATION_FAILED.search(line)
        if failed is not None:
            found.failed_operations[(int(failed["code"]), failed["what"])] += 1
        elif SKIPPED_MODULE in line:
            found.skipped_modules += 1
        elif (loss := said(line)) is not None:
            found.losses.append(loss)
    return found


def read(folder: Path) -> LogReading:
    """What the injection logs of a pass's process folders (``folder/pid_*/iket.injection.log``)
    say; an unreadable log says nothing."""
    lines: list[str] = []
    for path in sorted(folder.glob(f"pid_*/{LOG_FILE}")):
        try:
            with jsonio.open_regular(path) as handle:
                lines += handle.read(MAX_BYTES).decode("utf-8", "replace").splitlines()
        except (OSError, ValueError):  # unreadable, or not a regular file: says nothing
            continue
    return read_lines(lines)
