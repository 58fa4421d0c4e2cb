"""The default summary of a trace: per kernel, per range name and per marker name.

Pure functions from a :class:`~iket_cli.trace.Trace` to plain data, so that every
renderer (table, JSON, and later reports) shows the same numbers.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass

from .trace import Launch, Trace

#: The H200's global timer advances in steps of 32 ns: shorter durations read 0 or 32.
TIMER_STEP_NS = 32


@dataclass
class Stats:
    """Distribution of durations (or offsets) in nanoseconds."""

    count: int
    total: int
    mean: float
    min: int
    p50: int
    p90: int
    p99: int
    max: int

    @property
    def at_resolution_limit(self) -> bool:
        """True when the typical value is within one step of the timer: read it with care."""
        return self.p50 <= TIMER_STEP_NS


def stats(values: list[int]) -> Stats | None:
    """Nearest-rank percentiles; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    n = len(ordered)

    def rank(q: float) -> int:
        return ordered[min(n - 1, max(0, math.ceil(q * n) - 1))]

    total = sum(ordered)
    return Stats(n, total, total / n, ordered[0], rank(0.5), rank(0.9), rank(0.99), ordered[-1])


@dataclass
class RangeRow:
    name: str
    durations: Stats
    share_of_warp_time: float | None


@dataclass
class MarkerRow:
    name: str
    count: int
    offset_from_range: Stats | None  # from the start of the enclosing range


@dataclass
class KernelSummary:
    kernel: str
    launches: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    warp_lifetimes: Stats | None
    ranges: list[RangeRow]
    markers: list[MarkerRow]


def summarize(trace: Trace) -> list[KernelSummary]:
    """One summary per kernel name, launches of the same kernel pooled, in launch order."""
    by_kernel: dict[str, list[Launch]] = defaultdict(list)
    for launch in trace.launches:
        by_kernel[launch.kernel].append(launch)
    return [_kernel(trace, name, launches) for name, launches in by_kernel.items()]


def _kernel(trace: Trace, name: str, launches: list[Launch]) -> KernelSummary:
    durations: dict[int, list[int]] = defaultdict(list)
    offsets: dict[int, list[int]] = defaultdict(list)
    counts: Counter[int] = Counter()
    warp_times: list[int] = []
    for launch in launches:
        r = launch.ranges
        for idx, start, end in zip(r.name, r.start, r.end, strict=True):
            durations[idx].append(end - start)
        warp_times.extend(e - s for s, e in zip(launch.warps.start, launch.warps.end, strict=True))
        counts.update(Counter(launch.markers.name))
        _mark_offsets(launch, offsets)
    warp_total = sum(warp_times)
    ranges = [
        RangeRow(trace.name(idx), stats(values), sum(values) / warp_total if warp_total else None)
        for idx, values in durations.items()
    ]
    markers = [MarkerRow(trace.name(idx), counts[idx], stats(offsets.get(idx, []))) for idx in counts]
    first = launches[0]
    return KernelSummary(
        name,
        len(launches),
        first.grid,
        first.block,
        stats(warp_times),
        sorted(ranges, key=lambda row: -row.durations.total),
        markers,
    )


def _mark_offsets(launch: Launch, offsets: dict[int, list[int]]) -> None:
    """Each mark's offset from the start of the innermost range of its warp that holds it
    (the latest-starting one still open), appended to ``offsets[name]``.

    One sweep per warp over its ranges and marks in time order, with a stack of the ranges
    begun so far: ranges that ended are dropped from the top as the marks move on, so the
    top is always the innermost open range. No per-mark search, no depth limit.
    """
    r, m = launch.ranges, launch.markers
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for loc, start, end in zip(r.loc, r.start, r.end, strict=True):
        spans[loc].append((start, end))
    marks: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for loc, ts, idx in zip(m.loc, m.start, m.name, strict=True):
        marks[loc].append((ts, idx))
    for loc, found in marks.items():
        held = spans.get(loc)
        if not held:
            continue
        held.sort()
        found.sort()
        stack: list[tuple[int, int]] = []
        j, count = 0, len(held)
        for ts, idx in found:
            while j < count and held[j][0] <= ts:
                stack.append(held[j])
                j += 1
            while stack and stack[-1][1] < ts:
                stack.pop()
            if stack:
                offsets[idx].append(ts - stack[-1][0])


def to_dict(summary: list[KernelSummary]) -> list[dict]:
    """Plain JSON-ready data, with the resolution flag spelled out."""
    result = []
    for kernel in summary:
        record = asdict(kernel)
        for row, data in zip(kernel.ranges, record["ranges"], strict=True):
            data["at_resolution_limit"] = row.durations.at_resolution_limit
        result.append(record)
    return result
