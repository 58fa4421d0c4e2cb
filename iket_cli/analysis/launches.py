"""Launches as the warps saw them: per kernel, the launch span, warp lifetimes, SMs and gaps.

What a ``--warp-trace`` capture is about (it records every launch of the process, each
warp's start and end, and no event), and what an instrumented capture says of a kernel that
recorded no event. Per launch, from its warp lifetimes:

* the span: the first warp's start to the last warp's end (the launch as the GPU ran it);
* the SMs its warps ran on;
* the gap before it: from the end of every launch that started earlier to its own start
  (0 where it overlapped one: concurrent kernels).

Per kernel, launches are pooled in first-launch order, as :mod:`.summary` pools ranges.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..model.names import Namer, demangle
from ..model.trace import Trace
from ..model.vocab import INSTRUMENTED, WARP_TRACE
from .stats import Stats, ints, stats

#: The name ``iket diff`` gives a warp-traced kernel's launch spans (its one "range").
SPAN_ROW = "launch span"


def quiet_kernels(trace: Trace) -> set[str]:
    """The kernels that recorded no event in any launch (all of a warp trace's)."""
    loud = {launch.kernel for launch in trace.launches if len(launch.ranges) or len(launch.markers)}
    return {launch.kernel for launch in trace.launches} - loud


def mode_of(trace: Trace, known: str | None) -> str:
    """The capture's mode: ``known`` (its manifest's, or its kept config's), else read from the
    trace: one without any event, but with warp lifetimes, is taken for a warp trace (vocab.MODES)."""
    if known is not None:
        return known
    every = {launch.kernel for launch in trace.launches}
    lifetimes = any(len(launch.warps) for launch in trace.launches)  # a warp trace records them
    return WARP_TRACE if every and lifetimes and quiet_kernels(trace) == every else INSTRUMENTED


def spans(trace: Trace) -> list[tuple[str, int]]:
    """``(kernel, span)`` of each launch of a kernel without events, in file order."""
    quiet = quiet_kernels(trace)
    found = []
    for launch in trace.launches:
        if launch.kernel in quiet and len(launch.warps):
            found.append((launch.kernel, int(max(launch.warps.end)) - int(min(launch.warps.start))))
    return found


@dataclass
class KernelLaunches:
    kernel: str  # the raw symbol
    name: str  # the short name shown (unique within the capture)
    demangled: str
    launches: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    span: Stats | None  # first warp start to last warp end, per launch
    warp_lifetimes: Stats | None
    sms: int  # the most SMs one launch ran on
    gap_before: Stats | None  # idle time before each launch (process order)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Launch:
    kernel: str
    start: int | None
    end: int | None
    sms: int
    lifetimes: Any  # int64 array


def per_kernel(
    trace: Trace, namer: Namer | None = None, *, only: set[str] | None = None
) -> list[KernelLaunches]:
    """One row per kernel (``only``: of these symbols), launches pooled, first-launch order."""
    import numpy as np

    namer = namer or Namer(launch.kernel for launch in trace.launches)
    sm_of = sm_ids(trace)
    seen = [_measure(launch, sm_of) for launch in trace.launches]
    gaps = _gaps(seen)
    rows: dict[str, list[int]] = {}
    timed_any = any(launch.start is not None for launch in seen)
    for number, launch in enumerate(seen):
        # a group (--by sm, --cta) keeps every launch, with only its own warps: count those it ran
        ran = launch.start is not None or not timed_any
        if ran and (only is None or launch.kernel in only):
            rows.setdefault(launch.kernel, []).append(number)
    result = []
    for kernel, numbers in rows.items():
        first = trace.launches[numbers[0]]
        timed = [seen[n] for n in numbers if seen[n].start is not None]
        result.append(
            KernelLaunches(
                kernel=kernel,
                name=namer(kernel),
                demangled=demangle(kernel),
                launches=len(numbers),
                grid=first.grid,
                block=first.block,
                span=stats([w.end - w.start for w in timed]),
                warp_lifetimes=stats(np.concatenate([w.lifetimes for w in timed]) if timed else []),
                sms=max((w.sms for w in timed), default=0),
                gap_before=stats([gaps[n] for n in numbers if gaps[n] is not None]),
            )
        )
    return result


def sm_ids(trace: Trace):
    """Each location's SM as a numpy array (index: location; -1 where unknown): one pass over
    the location table per trace, for every launch's lookups."""
    import numpy as np

    return np.asarray([loc.get("smId", -1) for loc in trace.locations] or [-1], dtype=np.int64)


def warp_sms(loc, sm_of):
    """The SM of each warp location in ``loc`` (-1 for a location outside the table)."""
    import numpy as np

    inside = (loc >= 0) & (loc < len(sm_of))
    return np.where(inside, sm_of[np.clip(loc, 0, len(sm_of) - 1)], -1)


def _measure(launch, sm_of) -> _Launch:
    import numpy as np

    warps = launch.warps
    if not len(warps):
        return _Launch(launch.kernel, None, None, 0, np.zeros(0, np.int64))
    start, end, loc = ints(warps.start), ints(warps.end), ints(warps.loc)
    found = warp_sms(loc, sm_of)
    sms = len(np.unique(found[found >= 0]))
    return _Launch(launch.kernel, int(start.min()), int(end.max()), sms, end - start)


def _gaps(seen: list[_Launch]) -> list[int | None]:
    """Per launch, the idle time since every earlier-starting launch ended (None: no warps,
    or the first)."""
    gaps: list[int | None] = [None] * len(seen)
    order = sorted((n for n, w in enumerate(seen) if w.start is not None), key=lambda n: seen[n].start)
    ended = None
    for n in order:
        launch = seen[n]
        if ended is not None:
            gaps[n] = max(0, launch.start - ended)
        ended = launch.end if ended is None else max(ended, launch.end)
    return gaps
