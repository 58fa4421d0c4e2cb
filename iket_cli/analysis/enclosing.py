"""Which range holds each mark: the innermost range of the mark's warp open at its time.

``iket show`` measures each mark's offset from it; ``iket export`` records it per marker.
The innermost holder is the latest-starting range of the mark's warp with
``start <= ts <= end`` (what a stack of open ranges swept in time order leaves on top).
"""

from __future__ import annotations

from collections import defaultdict

from ..model.trace import Launch
from .stats import ints


def innermost(launch: Launch):
    """``(marks, ranges)``: the indices of the marks that a range holds, and of that range
    (into ``launch.markers`` and ``launch.ranges``), as two int64 numpy arrays.

    Vectorised: ranges sorted by (warp, start, end), each mark's last candidate found by
    ``searchsorted``, then a binary descent over a sparse table of range ends skips the
    candidates that ended before the mark, in log2(ranges) numpy steps for all marks.
    """
    import numpy as np

    r, m = launch.ranges, launch.markers
    none = np.zeros(0, np.int64)
    if not len(m) or not len(r):
        return none, none
    r_loc, r_start, r_end = ints(r.loc), ints(r.start), ints(r.end)
    m_loc, m_ts = ints(m.loc), ints(m.start)
    origin = min(int(r_start.min()), int(m_ts.min()))
    span = max(int(r_end.max()), int(m_ts.max())) - origin + 1
    warps = max(int(r_loc.max()), int(m_loc.max())) + 2  # loc -1 (no warp) becomes 0
    if span * warps >= 2**62 or min(int(r_loc.min()), int(m_loc.min())) < -1:
        return _swept(launch)  # keys would overflow int64
    start_key = (r_loc + 1) * span + (r_start - origin)
    end_key = (r_loc + 1) * span + (r_end - origin)
    step = np.diff(start_key)
    if (step < 0).any() or (np.diff(r_end)[step == 0] < 0).any():  # the decoder's order is usually it
        order = np.lexsort((r_end, start_key))
        start_key, end_key = start_key[order], end_key[order]
    else:
        order = np.arange(len(start_key))
    mark_key = (m_loc + 1) * span + (m_ts - origin)
    position = np.searchsorted(start_key, mark_key, side="right") - 1
    # most marks fall in their last candidate; only the others descend
    pending = np.flatnonzero((position >= 0) & (end_key[np.maximum(position, 0)] < mark_key))
    if len(pending):
        position[pending] = _descended(np, end_key, position[pending], mark_key[pending])
    found = np.flatnonzero(position >= 0)
    return found.astype(np.int64), order[position[found]].astype(np.int64)


def _descended(np, end_key, position, mark_key):
    """Each mark's last candidate range that has not ended before it (-1: none), from
    ``position`` back: a binary descent over a sparse table of the ranges' ends."""
    table = [end_key]  # table[j][i] = max(end_key[i : i + 2**j])
    while 2 ** len(table) <= len(end_key):
        half = 2 ** (len(table) - 1)
        table.append(np.maximum(table[-1][:-half], table[-1][half:]))
    for level in range(len(table) - 1, -1, -1):
        width = 2**level
        block = position - width + 1
        usable = block >= 0
        ended = np.zeros(len(position), bool)
        ended[usable] = table[level][block[usable]] < mark_key[usable]
        position[ended] -= width
    return position


def _swept(launch: Launch):
    """The same as :func:`innermost`, one Python sweep per warp with a stack of open ranges;
    for traces whose timestamps would overflow the vectorised keys."""
    import numpy as np

    r, m = launch.ranges, launch.markers
    spans: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for index, (loc, start, end) in enumerate(zip(r.loc, r.start, r.end, strict=True)):
        spans[loc].append((start, end, index))
    marks: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for index, (loc, ts) in enumerate(zip(m.loc, m.start, strict=True)):
        marks[loc].append((ts, index))
    pairs: list[tuple[int, int]] = []
    for loc, seen in marks.items():
        held = spans.get(loc)
        if not held:
            continue
        held.sort(key=lambda item: (item[0], item[1]))
        seen.sort()
        stack: list[tuple[int, int, int]] = []
        j, count = 0, len(held)
        for ts, index in seen:
            while j < count and held[j][0] <= ts:
                stack.append(held[j])
                j += 1
            while stack and stack[-1][1] < ts:
                stack.pop()
            if stack:
                pairs.append((index, stack[-1][2]))
    pairs.sort()
    marks_found = np.array([p[0] for p in pairs], np.int64)
    return marks_found, np.array([p[1] for p in pairs], np.int64)
