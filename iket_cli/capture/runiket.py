"""run-iket's command lines, and what its console output means.

iket runs run-iket for the passes only (it decodes itself) and reads its console: the
lines that start each pass, the buffer size it announces after the tracker pass, and,
when it fails, the lines that say why. :func:`classify` turns a failed run into one
clear :class:`~iket_cli.errors.CaptureError`.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from ..errors import CaptureError, InjectionCrash, NoInstrumentedKernelError
from ..model import runiket_facts
from ..model.vocab import JSON_EXPORT, JSON_PER_RAW_BYTE, PERFETTO_EXPORT, PERFETTO_PER_RAW_BYTE, exports_for
from ..system.runner import Line
from .plan import Plan

#: run-iket's console lines that mark the start of each pass (iket decodes afterwards).
PHASE_MARKERS = (
    ("Dry run application first", "tracker"),
    ("Run application for real profiling", "capture"),
)
_NO_KERNEL = "recommended_max_ts_cnt_per_warp is not found in tracker"
_TRACKER_FAILED = re.compile(r"Tracker failed with return code: (-?\d+)")
_PASS_FAILED = re.compile(r"exits abnormally with return code: (-?\d+) => Tool: (\w+)")
_BUFFER_LINE = re.compile(r"context buffer size: .*\(([\d,]+) bytes\)")
# The injection library aborts the capture pass with this when it records more than the
# tracker pass sized the buffer for (seen on the H200 with one extra launch in that pass).
_BUFFER_TOO_SMALL = re.compile(r"IKET trace buffer is too small.*?at least (\d+) bytes")
#: Lines of a run's tail shown under a failure, a timeout or an interrupt (all are in iket.log).
DETAIL_LINES = 15
SHOWN_LINES = 5

#: What to do when the two passes launch different things (pass drift; see analysis/drift.py).
DRIFT_HINT = (
    "the two passes must launch the same kernels the same number of times: look for "
    "non-deterministic launches, autotuning or data-dependent loops"
)
INSTRUMENT_HINT = (
    "instrument a kernel first: compile it with IketProfiler().compile(...) in TIRx, or use "
    "the iket ops in CuTe DSL; kernels loaded from a compile cache are not instrumented"
)


def estimated_bytes(device_buffer: int, formats: list[str]) -> int:
    """About how much disk a capture with this buffer takes: raw, JSON and Perfetto traces."""
    per_raw = 1
    exports = exports_for(formats)
    if JSON_EXPORT in exports:
        per_raw += JSON_PER_RAW_BYTE
    if PERFETTO_EXPORT in exports:
        per_raw += PERFETTO_PER_RAW_BYTE
    return device_buffer * per_raw


def profile_argv(plan: Plan, capture_dir: Path) -> list[str]:
    """The capture: both passes, raw output kept for iket's own (parallel) decoding."""
    opts = plan.options
    argv = _head(plan, capture_dir)
    argv += ["profile", "--postprocess", "none", "--keep", "--enable-stats"]
    if opts.max_ts_cnt_per_warp is not None:
        argv += ["--max-ts-cnt-per-warp", str(opts.max_ts_cnt_per_warp)]
    if opts.warp_trace:
        argv.append("--warp-trace")
    if plan.tracker.dir is not None:  # a cached or given tracker pass: the capture pass alone
        argv += ["--use-tracker-dir", str(plan.tracker.dir)]
    if opts.enabled_cluster:
        argv += ["--enabled-cluster", opts.enabled_cluster]
    if opts.enabled_cluster_config:
        argv += ["--enabled-cluster-config", str(Path(opts.enabled_cluster_config).resolve())]
    return [*argv, "--", *plan.workload_argv]


def overhead_argv(plan: Plan, plain_dir: Path) -> list[str]:
    """The --overhead run: warp lifetimes only, no kernel body patched, JSON decoded by run-iket."""
    argv = _head(plan, plain_dir)
    argv += ["profile", "--postprocess", "json", "--warp-trace", "--enable-stats"]
    if plan.options.keep:
        argv.append("--keep")
    return [*argv, "--", *plan.workload_argv]


def _head(plan: Plan, output_dir: Path) -> list[str]:
    opts = plan.options
    argv = [plan.tool.path, "--output-dir", str(output_dir), "--working-dir", str(plan.cwd)]
    argv += ["--log-level", opts.log_level or DEFAULT_LOG_LEVEL]
    if opts.context_buffer_size:
        argv += ["--context-buffer-size", opts.context_buffer_size]
    return argv


def is_tool_line(line: str) -> bool:
    """run-iket's (and iket's) own console lines, as opposed to the workload's."""
    return line.startswith(("[run-iket]", "[iket]"))


def is_injection_line(line: str) -> bool:
    """A line of IKET's injection library's log, printed by the workload process (its warnings,
    and at ``info`` its notes): kept in ``iket.log``, off the terminal unless ``--verbose``."""
    return _INJECTION_LINE.match(line) is not None


#: ``[2026-12-07 01:29:48.646] [IketInjectionManager] [warning] ...`` (spdlog's pattern).
_INJECTION_LINE = re.compile(r"\[\d{4}-\d\d-\d\d [\d:.]+\] \[(?:IketInjectionManager|Tool-[\w-]+)\] \[\w+\] ")
#: The level iket runs the injection at unless ``--log-level`` says otherwise: IKET says what
#: it lost at ``warn`` and ``info`` only; the log costs nothing measurable (docs/history/benchmarks.md,
#: "The injection log's cost") and is read into the completeness record.
DEFAULT_LOG_LEVEL = "info"


def phase_of(line: str) -> str | None:
    """The pass a run-iket line announces, if it announces one."""
    for marker, phase in PHASE_MARKERS:
        if marker in line:
            return phase
    return None


def announced_buffer(line: str) -> int | None:
    """The device buffer (bytes) run-iket announces after the tracker pass, if this line says it."""
    found = _BUFFER_LINE.search(line)
    return int(found.group(1).replace(",", "")) if found else None


def last_lines(tail: list[Line], count: int = SHOWN_LINES) -> list[str]:
    """The last lines worth showing under an error: no run-iket noise, no Python traceback
    frames of run-iket's (their last line, the exception, stays)."""
    return [line.text for line in meaningful(list(tail))][-count:]


def meaningful(tail: list[Line]) -> list[Line]:
    """``tail`` without run-iket's stats and advice lines, without the frames of run-iket's
    own tracebacks (the workload's tracebacks are the user's: they stay) and without what was
    printed while iket stopped the tree."""
    kept, in_traceback = [], False
    for line in tail:
        if line.stopping:  # printed while iket stopped the tree: its own doing, in the log only
            continue
        if line.tool and line.text.startswith("Traceback (most recent call last):"):
            in_traceback = True
            continue
        if in_traceback and line.tool and (line.text.startswith(" ") or not line.text.strip()):
            continue
        in_traceback = False
        if line.tool and is_noise(line.text):
            continue
        kept.append(line)
    return kept


def is_noise(text: str) -> bool:
    """run-iket's stats summary and advice lines, which bury the real failure."""
    body = text.removeprefix("[run-iket]").strip()
    return text.startswith("[run-iket]  ") or body.startswith(("run-iket stats", "Re-run the same"))


def classify(
    tail: list[Line], returncode: int, phase: str, device_buffer: int | None, *, warp_trace: bool = False
) -> CaptureError:
    """Turn run-iket's exit and last lines into one clear error.

    Its details are the last lines worth showing (the workload's own output, which may end
    in the workload's traceback); run-iket's tracebacks are never shown, only their last line
    where nothing better explains the failure. Everything is in ``iket.log``. A workload
    killed by a signal without a Python error of its own died inside the injection
    (:class:`InjectionCrash`); ``warp_trace``: there was no tracker pass to compare with.
    """
    text = "\n".join(line.text for line in tail)
    details = last_lines(tail, DETAIL_LINES)
    if _NO_KERNEL in text:
        return NoInstrumentedKernelError(
            "the workload launched no IKET-instrumented kernel (the tracker pass saw none)",
            phase="tracker",
            hint=INSTRUMENT_HINT,
        )
    tracker = _TRACKER_FAILED.search(text)
    if tracker and _injection_killed(tracker.group(1), tail):
        return _injection_crash(int(tracker.group(1)), "tracker", details)
    if tracker:
        return CaptureError(
            f"the workload exited with status {status_text(tracker.group(1))} in the tracker pass",
            phase="tracker",
            details=details,
        )
    too_small = _BUFFER_TOO_SMALL.search(text)
    if too_small:
        sized = f", sized from the tracker pass at {device_buffer:,} bytes" if device_buffer else ""
        return CaptureError(
            "the capture pass recorded more than the tracker pass: its trace buffer needed at "
            f"least {int(too_small.group(1)):,} bytes{sized}, and the workload was aborted",
            phase="capture",
            hint=f"{DRIFT_HINT}; or give --context-buffer-size {too_small.group(1)} to capture anyway",
            details=details,
        )
    failed_pass = _PASS_FAILED.search(text)
    if failed_pass and failed_pass.group(2) == "iket":
        if _injection_killed(failed_pass.group(1), tail):
            return _injection_crash(int(failed_pass.group(1)), "capture", details, warp_trace=warp_trace)
        return CaptureError(
            f"the workload exited with status {status_text(failed_pass.group(1))} in the capture pass",
            phase="capture",
            hint=None
            if warp_trace
            else "a workload that passes the tracker pass but fails the capture pass often "
            "launches different kernels or event counts in the two passes",
            details=details,
        )
    return CaptureError(
        f"run-iket failed with status {returncode} during the {phase} phase", phase=phase, details=details
    )


#: What a user can do when run-iket's injection kills the workload (docs/faults.md: "When
#: run-iket itself fails").
INJECTION_HINT = (
    f"run-iket {runiket_facts.LATEST.release} kills processes that run half-precision (bf16 or fp16) cuBLAS "
    "GEMMs, among "
    "others (docs/faults.md); capture only your kernel's calls: add "
    "--extract MODULE:FUNC (the Python function that launches it), and the model runs once "
    "without run-iket while the passes replay those calls; the injection's own log is in iket.log"
)


#: The signals of a process that crashed (not one that was killed: SIGKILL is the OOM killer's).
CRASH_SIGNALS = (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)


def _injection_killed(status: str, tail: list[Line]) -> bool:
    """A pass's workload crashed by a signal, having printed no Python traceback of its own."""
    if -int(status) not in CRASH_SIGNALS:
        return False
    said = (line.text for line in tail if not line.tool)
    return not any(text.startswith("Traceback (most recent call last)") for text in said)


def _injection_crash(
    status: int, where: str, details: list[str], *, warp_trace: bool = False
) -> InjectionCrash:
    """The error of a workload killed inside the injection (see :class:`InjectionCrash`)."""
    which = "the capture pass (--warp-trace runs no tracker pass)" if warp_trace else f"the {where} pass"
    return InjectionCrash(
        f"the workload was killed by {signal.Signals(-status).name} (status {status}) inside "
        f"run-iket's injection in {which}, with no Python error of its own: most likely NVIDIA's "
        "tool failed here, not your code (check: run it without iket)",
        phase=where,
        hint=INJECTION_HINT,
        details=details,
    )


def status_text(code: str | int) -> str:
    """``5``, or ``-6 (SIGABRT)`` for a workload killed by a signal."""
    number = int(code)
    if number < 0:
        try:
            return f"{number} ({signal.Signals(-number).name})"
        except ValueError:
            pass
    return str(number)
