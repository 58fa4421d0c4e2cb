"""Which range holds each mark: the innermost range of the mark's warp open at its time.

``iket show`` measures each mark's offset from it; ``iket export`` records it per marker.
The innermost holder is the latest-starting range of the mark's warp with
``start <= ts <= end``, of two starting on one timer tick the later in the trace (what a
stack of the ranges opened in the trace's order leaves on top: the decoder writes a range
before the ranges it holds, and a warp's ranges one after another).
"""

from __future__ import annotations

from collections import defaultdict

from ..model.trace import Launch
from .stats import ints


def innermost(launch: Launch):
    """``(marks, ranges)``: the indices of the marks that a range holds, and of that range
    (into ``launch.markers`` and ``launch.ranges``), as two int64 numpy arrays.

    Vectorised: ranges in (warp, start) order, ties in the trace's order (the decoder's
    order: then not sorted again), each mark's last candidate found by
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
    r_warp, m_warp = _warp_numbers(np, r_loc, m_loc, warps)
    start_key = r_warp * span + (r_start - origin)
    end_key = r_warp * span + (r_end - origin)
    step = np.diff(start_key)
    if (step < 0).any():  # the decoder's order is usually it
        order = np.argsort(start_key, kind="stable")
        start_key, end_key = start_key[order], end_key[order]
    else:
        order = None  # the ranges' own order: no gather of a million indices through it
    mark_key = m_warp * span + (m_ts - origin)
    position = np.searchsorted(start_key, mark_key, side="right") - 1
    # most marks fall in their last candidate; only the others descend
    pending = np.flatnonzero((position >= 0) & (end_key[np.maximum(position, 0)] < mark_key))
    if len(pending):
        position[pending] = _outer(np, start_key, end_key, position[pending], mark_key[pending])
    found = np.flatnonzero(position >= 0)
    held = position[found] if order is None else order[position[found]]
    return found.astype(np.int64, copy=False), held.astype(np.int64, copy=False)


def _warp_numbers(np, r_loc, m_loc, warps: int):
    """Each range's and each mark's warp as the key's high part: where the ranges come warp
    by warp (the decoder's order), the warps numbered 1, 2, .. in that order, so the keys
    rise as the ranges do and need no sort (a later launch runs its CTAs on other SMs: by
    location number its warps come out of order, and a 30 ms lexsort a launch followed);
    marks of a warp without ranges get 0, below every range. Else the location plus one."""
    boundary = np.empty(len(r_loc), bool)
    boundary[0] = True
    np.not_equal(r_loc[1:], r_loc[:-1], out=boundary[1:])
    firsts = r_loc[boundary] + 1  # loc -1 (no warp) becomes 0
    number = np.zeros(warps, np.int64)
    number[firsts] = np.arange(1, len(firsts) + 1)
    if not np.array_equal(number[firsts], np.arange(1, len(firsts) + 1)):  # a warp's ranges apart
        return r_loc + 1, m_loc + 1
    return np.cumsum(boundary, dtype=np.int64), number[m_loc + 1]


def _outer(np, start_key, end_key, position, mark_key):
    """For marks whose last candidate (``position``) ended before them: the last range before
    it that has not (-1: none). Only a range that ends after the next one starts can be that
    range (it ends at or after the mark, which is after the candidate's end, which is at or
    after the start of every range from the next one on), so the search runs over those
    alone (one in a hundred of big_kernel.py's, where a table over all was 40 ms a launch)."""
    able = np.flatnonzero(end_key[:-1] > start_key[1:])
    if not len(able):
        return np.full(len(position), -1, np.int64)
    before = np.searchsorted(able, position, side="left") - 1  # the last of them before each candidate
    found = _descended(np, end_key[able], before, mark_key)
    return np.where(found >= 0, able[np.maximum(found, 0)], -1)


def _descended(np, end_key, position, mark_key):
    """Each mark's last range from ``position`` back that has not ended before it (-1: none):
    a binary descent over a sparse table of the ranges' ends."""
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
        held.sort(key=lambda item: (item[0], item[2]))  # of two starting at once, the later on top
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
