"""``iket profile --overhead``: what the instrumentation costs each kernel.

An IKET capture times the instrumented kernel: every ``range_push``/``range_pop``/``mark``
writes a timestamp to global memory, so the kernel runs longer than it does without them.
To learn by how much, ``--overhead`` runs the workload once more under ``run-iket
--warp-trace``, which patches no kernel body and records only when each warp started and
ended. A launch's duration is the span of its warps (first warp start to last warp end) in
both captures, so the two are measured the same way, by the same global timer.

Per kernel (matched by name; the warp-trace pass also records kernels that were never
instrumented, PyTorch's for example, which are left out) the report gives the median
launch duration of each pass, the difference, the difference as a share of the
uninstrumented duration, and that difference divided by the events one warp recorded in
a launch (pushes, pops and marks, averaged over the warps): the cost of one event on the
critical path. Medians, because the first launch of a kernel is often slower.

Both spans are read off a timer that advances in 32 ns steps (on the H200), so a
difference of one step or less is flagged ``at_resolution_limit``: the instrumentation
cost of such a kernel is below what the timer can show, and its sign means nothing.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..model import trace as trace_mod
from ..model.vocab import TIMER_STEP_NS, trace_glob


def launch_span(launch: trace_mod.Launch) -> int | None:
    """First warp start to last warp end, in ns; None for a launch without warp lifetimes."""
    warps = launch.warps
    if not len(warps):
        return None
    return max(warps.end) - min(warps.start)


def events_per_warp(launch: trace_mod.Launch) -> float | None:
    """Timestamps one warp wrote in this launch, on average: 2 per range, 1 per mark."""
    warps = len(launch.warps)
    if not warps:
        return None
    return (2 * len(launch.ranges) + len(launch.markers)) / warps


def _by_kernel(traces: Iterable[trace_mod.Trace]) -> dict[str, list[trace_mod.Launch]]:
    kernels: dict[str, list[trace_mod.Launch]] = defaultdict(list)
    for loaded in traces:
        for launch in loaded.launches:
            kernels[launch.kernel].append(launch)
    return kernels


def compare(
    instrumented: Iterable[trace_mod.Trace], plain: Iterable[trace_mod.Trace]
) -> list[dict[str, Any]]:
    """One row per instrumented kernel that the plain (warp-trace) run also launched."""
    plain_kernels = _by_kernel(plain)
    rows = []
    for kernel, launches in _by_kernel(instrumented).items():
        with_events = [s for s in map(launch_span, launches) if s is not None]
        without = [s for s in map(launch_span, plain_kernels.get(kernel, [])) if s is not None]
        if not with_events or not without:
            continue
        traced, bare = statistics.median(with_events), statistics.median(without)
        events = [e for e in map(events_per_warp, launches) if e is not None]
        per_warp = statistics.median(events) if events else 0.0
        cost = traced - bare
        rows.append(
            {
                "kernel": kernel,
                "launches": len(launches),
                "uninstrumented_launches": len(without),
                "instrumented_ns": round(traced),
                "uninstrumented_ns": round(bare),
                "overhead_ns": round(cost),
                "overhead_share": round(cost / bare, 4) if bare > 0 else None,
                "events_per_warp": round(per_warp, 2),
                "ns_per_event": round(cost / per_warp, 2) if per_warp > 0 else None,
                "at_resolution_limit": abs(cost) <= TIMER_STEP_NS,
            }
        )
    return sorted(rows, key=lambda r: -r["overhead_ns"])


def measure(capture_dir: Path, plain_dir: Path) -> list[dict[str, Any]]:
    """Compare the capture's JSON traces with those of the warp-trace run in ``plain_dir``."""
    instrumented = [trace_mod.load(p) for p in sorted(capture_dir.glob(trace_glob()))]
    plain = [trace_mod.load(p) for p in sorted(plain_dir.glob(trace_glob()))]
    return compare(instrumented, plain)
