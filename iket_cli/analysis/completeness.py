"""Whether a capture holds all IKET should have recorded, from every source that can tell
(:mod:`iket_cli.model.completeness` defines the record; docs/manifest.md documents it).

The sources, each read the way the H100 showed it behaves (docs/faults.md, "What IKET can
lose"):

* ``decode``: per launch of an instrumented kernel, the warps whose slot in the raw capture
  overflowed its budget or stayed empty (:mod:`iket_cli.model.rawwarps`): dropped whole by
  the decoder; the largest overflow says what the kernel needs;
* ``budget``: the budget each launch ran with (``maxTsCntPerWarp``) against what the tracker
  pass found the process's warps emit (``recommended_max_ts_cnt_per_warp``);
* ``injection-log``: the library's own messages of lost data (:mod:`iket_cli.model.injection_log`);
* ``launches``: CUDA graph replays the tracker pass saw that the capture lacks (a plain
  launch count that differs between the passes is pass drift, :mod:`.drift`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import artifacts, injection_log, jsonio, rawwarps
from ..model.completeness import (
    BUDGET,
    CUDA_GRAPH,
    LAUNCHES,
    RECORDS,
    UNKNOWN,
    Completeness,
    Loss,
    fix_for,
)
from ..model.injection_log import LogReading, Said
from ..model.names import Namer
from ..model.rawwarps import LaunchWarps
from ..model.trace import Trace
from ..model.vocab import (
    GEN_CONFIG_DIR,
    INSTRUMENT_CONFIG,
    RAW_DIR,
    RAW_MANIFEST,
    TRACKER_DIR,
    TRACKER_JSON,
    raw_pid,
)

#: What an empty launch may come from when no source names its cause.
EMPTY_CANDIDATES = (
    "a budget of timestamps per warp below what the kernel emits (--max-ts-cnt-per-warp)",
    "a kernel loaded from a compile cache, not instrumented (CUTE_DSL_NO_CACHE=1; clear the TIRx cache)",
    "warps whose annotations lie on a path this launch did not take",
)


@dataclass
class Evidence:
    """What the pipeline gathered for :func:`check`: one process's raw launches at a time."""

    #: Per process (pid hex): its decodable launches' warps (None: no raw capture to read).
    warps: dict[str, list[LaunchWarps] | None] = field(default_factory=dict)
    #: The tracker pass's recommended budget (the largest of its processes'); None: no tracker.
    needed: int | None = None
    #: Launches per kernel name in the tracker pass (pooled), and those of CUDA graphs in it
    #: and in the capture pass (``graphLaunches``). None: no tracker pass listed them.
    tracked: Counter | None = None
    tracked_graph: Counter | None = None
    captured_graph: Counter = field(default_factory=Counter)
    #: The capture pass's injection logs; None where none was kept.
    log: LogReading | None = None
    #: The level the capture pass's injection logged at (its ``iket.config.json``; None: unknown).
    log_level: str | None = None
    #: The library's failed operations in the capture pass's output, by (code, what).
    failed: Counter = field(default_factory=Counter)


def gather(
    capture_dir: Path, *, tracker_dir: Path | None = None, output_lines: list[str] | None = None
) -> Evidence:
    """What a run-iket output folder (kept: ``iket/``, ``tracker/``, ``gen-config/``) tells of a
    loss. ``tracker_dir``: the tracker pass's output where it is not in the folder (a reused
    one); ``output_lines``: the capture pass's console, where the library's failed operations
    are printed (docs/faults.md, "What IKET can lose")."""
    raw = capture_dir / RAW_DIR
    tracker = tracker_dir if tracker_dir is not None else capture_dir / TRACKER_DIR
    instrumented = artifacts.instrumented_kernels(capture_dir / GEN_CONFIG_DIR / INSTRUMENT_CONFIG)
    warps = {}
    for folder in sorted(raw.glob("pid_*")):
        pid_hex = raw_pid(folder.name)
        if pid_hex is not None:
            warps[pid_hex] = rawwarps.read(folder / RAW_MANIFEST)
    tracked, tracked_procs = artifacts.launch_counts(tracker, TRACKER_JSON, "kernelName")
    tracked_graph = artifacts.graph_launch_counts(tracker, TRACKER_JSON)
    captured_graph = artifacts.graph_launch_counts(raw, RAW_MANIFEST)
    logged = any(raw.glob(f"pid_*/{injection_log.LOG_FILE}"))
    return Evidence(
        warps=warps,
        needed=artifacts.recommended_budget(tracker),
        tracked=_only(tracked, instrumented) if tracked_procs else None,
        tracked_graph=_only(tracked_graph, instrumented) if tracked_procs else None,
        captured_graph=_only(captured_graph, instrumented),
        log=injection_log.read(raw) if logged else None,
        log_level=_configured_level(raw),
        failed=injection_log.read_lines(output_lines or []).failed_operations,
    )


def _configured_level(raw: Path) -> str | None:
    """The level the capture pass's injection logged at (run-iket's ``iket.config.json``)."""
    try:
        level = jsonio.read(raw / injection_log.CONFIG_FILE).get("logLevel")
    except (OSError, ValueError, AttributeError):
        return None
    return level if isinstance(level, str) else None


def _only(counts: Counter, kernels: set[str]) -> Counter:
    """The launch counts (keyed by ``(kernelName,)``) of the instrumented kernels, by name."""
    return Counter({key[0]: n for key, n in counts.items() if key[0] in kernels})


def check(evidence: Evidence) -> Completeness:
    """Every loss the evidence shows, one per process, kernel and cause."""
    result = Completeness()
    names = Namer(
        [w.kernel for found in evidence.warps.values() for w in found or []]
        + list(evidence.tracked or [])
        + list(evidence.captured_graph)
    )
    told = _told(evidence.log, names) if evidence.log is not None else []
    for pid_hex, found in evidence.warps.items():
        if found is None:
            continue
        result.losses += _dropped(pid_hex, found, evidence.needed, told, names)
    result.losses += [loss for loss in told if not covered(loss, result.losses)]
    result.losses += _missing(evidence, names, result.losses)
    result.checked, result.unchecked = _sources(evidence)
    return result


def _dropped(
    pid_hex: str, found: list[LaunchWarps], needed: int | None, told: list[Loss], names: Namer
) -> list[Loss]:
    """Per kernel: launches that recorded nothing, or lost some warps' records, and why."""
    by_kernel: dict[str, list[LaunchWarps]] = {}
    for launch in found:
        if launch.dropped:
            by_kernel.setdefault(launch.kernel, []).append(launch)
    losses = []
    for kernel, launches in by_kernel.items():
        short = names(kernel)
        budget = min((x.budget for x in launches if x.budget is not None), default=None)
        empty = sum(1 for x in launches if x.recorded == 0)
        dropped = sum(x.dropped for x in launches)
        emitted = max(x.emitted for x in launches) if any(x.overflowed for x in launches) else None
        said = next((t for t in told if t.kernel == kernel and t.cause == BUDGET), None)
        over = budget is not None and needed is not None and budget < needed
        cause = BUDGET if emitted or said or over else UNKNOWN
        what = (
            f"{_n(empty, 'launch', 'launches')} of {short} recorded nothing"
            if empty == len(launches)
            else f"{_n(dropped, 'warp record', 'warp records')} of {short} dropped in "
            f"{_n(len(launches), 'launch', 'launches')}"
        )
        need = _needed(emitted, needed) if cause == BUDGET else None
        source = "decode" if emitted else "injection-log" if said else "budget" if over else "decode"
        losses.append(
            Loss(
                kernel,
                cause,
                RECORDS,
                len(launches),
                f"{what}{_why(cause, budget, emitted, needed)}",
                fix_for(cause, need) if cause != UNKNOWN else "look for: " + "; ".join(EMPTY_CANDIDATES),
                source,
                short=short,
                pid_hex=pid_hex,
                records=dropped,
                needed=need,
                budget=budget,
            )
        )
    return losses


def _needed(emitted: int | None, counted: int | None) -> int | None:
    """The budget to pass: the tracker pass's count where it covers what the warps emitted,
    else the next power of two above it (the tracker's own rounding: 13 -> 16, 4 -> 8)."""
    if emitted is None:
        return counted
    if counted is not None and counted > emitted:
        return counted
    return 1 << emitted.bit_length()


def _why(cause: str, budget: int | None, emitted: int | None, counted: int | None) -> str:
    if cause != BUDGET:
        return ": the cause is not known"
    if emitted:
        return f": its warps emitted {emitted:,} timestamps, over the budget of {_count(budget)} per warp"
    need = f" below the {counted:,} the tracker pass counted" if counted else " below what its warps emit"
    return f": the budget of {_count(budget)} timestamps per warp is{need}"


def _told(log: LogReading, names: Namer) -> list[Loss]:
    """The log's losses, one per kernel and cause (the library logs each launch's)."""
    pooled: dict[tuple[str | None, str, str], list[Said]] = {}
    for said in log.losses:
        pooled.setdefault((said.kernel, said.cause, said.lost), []).append(said)
    losses = []
    for (kernel, cause, lost), items in pooled.items():
        short = names(kernel) if kernel and kernel in names else (kernel or "")
        records = sum(s.records or 0 for s in items) or None
        budget = next((s.budget for s in items if s.budget is not None), None)
        losses.append(
            Loss(
                kernel or "",
                cause,
                lost,
                len(items),
                f"IKET says: {items[0].text}" + (f" ({len(items)} times)" if len(items) > 1 else ""),
                fix_for(cause),
                "injection-log",
                short=short,
                records=records,
                budget=budget,
            )
        )
    return losses


def covered(loss: Loss, found: list[Loss]) -> bool:
    """Whether the decode already accounts for a loss the log reports (the same kernel's)."""
    return any(f.kernel == loss.kernel and f.lost == loss.lost for f in found if loss.kernel)


def _missing(evidence: Evidence, names: Namer, found: list[Loss]) -> list[Loss]:
    """Launches of a CUDA graph the tracker pass saw that the capture lacks, per kernel. On the
    H100 a kernel replayed in a CUDA graph is traced (the trace's ``graphLaunches``);
    the library then prints one failed operation per pass (CUDA error 1, the launch captured
    into the graph), so a failed operation alone is no loss. A difference between the passes'
    plain launches is pass drift (analysis/drift.py), not a loss."""
    if evidence.tracked_graph is None or any(loss.cause == CUDA_GRAPH for loss in found):
        return []
    failed = sum(evidence.failed.values())
    said = f"; IKET printed {_n(failed, 'failed operation', 'failed operations')}" if failed else ""
    losses = []
    for kernel, count in evidence.tracked_graph.items():
        captured = evidence.captured_graph.get(kernel, 0)
        if count > captured:
            losses.append(
                Loss(kernel, CUDA_GRAPH, LAUNCHES, count - captured,
                     f"{_n(count - captured, 'graph launch', 'graph launches')} of {names(kernel)} not "
                     f"traced ({count} in the tracker pass, {captured} captured{said})",
                     fix_for(CUDA_GRAPH), "launches", short=names(kernel))
            )  # fmt: skip
    return losses


def from_trace(trace: Trace) -> list[dict[str, Any]]:
    """The losses a trace shows by itself, where nothing beside it recorded them (a bare trace,
    a folder raw run-iket wrote without ``--keep``, an in-process session's): every warp of a
    traced launch writes its lifetime, so a launch with fewer lifetimes than its grid has warps
    lost the others' records (not checked where one cluster was traced). With none left, the
    known cause is the budget: the H100 showed exactly this (run-iket and the session alike)."""
    by_kernel: dict[str, list[tuple[int, int]]] = {}
    for launch in trace.launches:
        warps = rawwarps.warps_of(launch.grid, launch.block)
        recorded = len(set(launch.warps.loc))
        if not launch.single_cluster and recorded < warps:
            by_kernel.setdefault(launch.kernel, []).append((recorded, warps))
    names = Namer([launch.kernel for launch in trace.launches])
    losses = []
    for kernel, launches in by_kernel.items():
        empty = all(recorded == 0 for recorded, _ in launches)
        dropped = sum(warps - recorded for recorded, warps in launches)
        cause = BUDGET if empty else UNKNOWN
        what = (
            f"{_n(len(launches), 'launch', 'launches')} of {names(kernel)} recorded nothing, not even "
            "their warps' lifetimes: most likely a budget of timestamps per warp below what they emit"
            if empty
            else f"{_n(dropped, 'warp record', 'warp records')} of {names(kernel)} missing in "
            f"{_n(len(launches), 'launch', 'launches')}: the cause is not known"
        )
        fix = fix_for(cause) if empty else "look for: " + "; ".join(EMPTY_CANDIDATES)
        losses.append(Loss(kernel, cause, RECORDS, len(launches), what, fix, "trace", short=names(kernel),
                           records=dropped).to_dict())  # fmt: skip
    return losses


def shown_too(recorded: list[dict[str, Any]] | None, trace: Trace) -> list[dict[str, Any]]:
    """The losses a reader says of ``trace``: what its capture recorded, and what the trace
    shows by itself of the kernels the record does not name (a record damaged, or made before
    a loss could be seen, never hides a loss the trace shows)."""
    kept = list(recorded or [])
    named = {loss.get("kernel") for loss in kept}
    return kept + [loss for loss in from_trace(trace) if loss["kernel"] not in named]


def with_traces(record: dict[str, Any] | None, shown: list[dict[str, Any]]) -> dict[str, Any]:
    """A completeness record with what the traces show by themselves (:func:`from_trace`, each
    loss with its ``pid_hex``) added to what ``record`` (a manifest's, or None) already says: a
    folder of JSON traces with no raw capture beside them is judged from the traces, never left
    claiming nothing while a trace shows a loss."""
    kept = record if isinstance(record, dict) else {}
    found = Completeness(
        losses=[Loss.of(loss) for loss in kept.get("losses") or []],
        checked=[c for c in kept.get("checked") or [] if c != "trace"],
        unchecked=list(kept.get("unchecked") or []),
    )
    for new in map(Loss.of, shown):
        if not any(f.kernel == new.kernel and f.pid_hex in (new.pid_hex, None) for f in found.losses):
            found.losses.append(new)
    found.checked.append("trace")
    return found.to_dict()


def _sources(evidence: Evidence) -> tuple[list[str], list[dict[str, str]]]:
    checked, unchecked = [], []
    if any(found is not None for found in evidence.warps.values()):
        checked.append("decode")
    else:
        unchecked.append({"source": "decode", "why": "no raw capture was read"})
    if evidence.needed is not None:
        checked.append("budget")
    else:
        unchecked.append({"source": "budget", "why": "no tracker pass counted what the warps emit"})
    if evidence.log is None:
        unchecked.append({"source": "injection-log", "why": "no injection log was kept"})
    elif evidence.log_level in (None, "error"):
        unchecked.append(
            {"source": "injection-log", "why": "logged at 'error': IKET says its losses at 'warn' and 'info'"}
        )
    else:
        checked.append("injection-log")
    if evidence.tracked is not None:
        checked.append("launches")
    else:
        unchecked.append({"source": "launches", "why": "no tracker pass listed the workload's launches"})
    return checked, unchecked


def _count(value: int | None) -> str:
    """A count with its thousands separators (``?`` where not known)."""
    return f"{value:,}" if isinstance(value, int) else "?"


def _n(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"
