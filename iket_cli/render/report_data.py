"""The timeline data an HTML report embeds: rows, ranges, marks, lanes, payloads and arrows.

A million-event capture cannot be drawn whole, nor embedded whole in a file people mail
around: the timeline embeds at most a budget of ranges and marks, shared between the
launches, each launch keeping whole warps in SM/CTA/warp order until its share is used.
Times are stored relative to the launch start as base64 little-endian int32 arrays (about
21 bytes per range); a launch longer than 2.1 s is stored in coarser units. Alongside, per
launch and only where the capture has them:

* ``kinds``: each range's type (push/pop, or a token range drawn on a lane of its own);
* ``rp``/``rpt``, ``mp``/``mpt``: payload values (float64) and types of ranges and marks;
* ``flows``: (source, target, edge) triples of embedded ranges: the DAG's arrows;
* each row's warp role, from ``kernel_symbols.json``;
* ``occ``: per SM, the warps resident over the launch in :data:`OCCUPANCY_BINS` steps (how
  the grid filled the GPU; all SMs, even where the rows shown are a budget's share).

A launch's rows are at most :data:`ROW_BUDGET` warps (a warp-trace launch of PyTorch's has
16k): the occupancy and the tables cover them all.
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

from ..analysis import launches as launches_mod
from ..analysis.flows import Flow
from ..analysis.stats import any_distinct
from ..model import trace as trace_mod
from ..model.annotations import Roles
from ..model.names import Namer, demangle

EVENT_BUDGET = 300_000  # ranges + marks embedded in the timeline of one report
ROW_BUDGET = 2048  # warps (rows) embedded per launch
OCCUPANCY_BINS = 240
INT32_MAX = 2**31 - 1

Loaded = tuple[str, Path, trace_mod.Trace]


def timelines(
    processes: list[Loaded],
    *,
    budget: int | None = None,
    roles: Roles | None = None,
    flows: list[Flow] | None = None,
) -> list[dict[str, Any]]:
    """Per process, per launch: what the page's timeline draws."""
    budget = budget or EVENT_BUDGET
    launches = sum(len(t.launches) for _, _, t in processes) or 1
    share = max(budget // launches, 1)
    by_launch: dict[int, list[Flow]] = {}
    for flow in flows or []:
        by_launch.setdefault(flow.launch, []).append(flow)
    namer = Namer(launch.kernel for _, _, loaded in processes for launch in loaded.launches)
    result = []
    for label, _, loaded in processes:
        launches = []
        sm_of = launches_mod.sm_ids(loaded)
        for n, launch in enumerate(loaded.launches):
            data = _launch(loaded, n, launch, share, roles, by_launch.get(n, []), sm_of)
            launches.append({**data, "name": namer(launch.kernel), "demangled": demangle(launch.kernel)})
        result.append({"process": label, "launches": launches})
    return result


def _launch(
    loaded: trace_mod.Trace,
    number: int,
    launch: trace_mod.Launch,
    budget: int,
    roles: Roles | None,
    flows: list[Flow],
    sm_of,
) -> dict[str, Any]:
    """One launch for the timeline: whole warps, in SM/CTA/warp order, within ``budget``;
    ``sm_of`` maps locations to SMs (:func:`~iket_cli.analysis.launches.sm_ids`)."""
    import numpy as np

    locations = loaded.locations
    r, m, w = launch.ranges, launch.markers, launch.warps
    rloc, mloc, wloc = (np.asarray(c.loc, np.int64) for c in (r, m, w))
    used = any_distinct(np.concatenate([wloc, rloc, mloc])).tolist()

    def where(loc: int) -> tuple:
        info = locations[loc] if 0 <= loc < len(locations) else {}
        return (info.get("smId", -1), tuple(info.get("ctaId", (-1, -1, -1))), info.get("warpId", -1))

    order = sorted(used, key=lambda loc: (where(loc), loc))
    per_row = Counter(_counts(rloc)) + Counter(_counts(mloc))  # events per warp
    kept, events = [], 0
    for loc in order:
        if kept and (events + per_row[loc] > budget or len(kept) >= ROW_BUDGET):
            break
        kept.append(loc)
        events += per_row[loc]
    row_of = _rows(kept, rloc, mloc, wloc)
    rstart, rend, mstart = (np.asarray(c, np.int64) for c in (r.start, r.end, m.start))
    wstart, wend = np.asarray(w.start, np.int64), np.asarray(w.end, np.int64)
    starts = [int(c.min()) for c in (wstart, rstart, mstart) if len(c)]
    origin = min(starts, default=0)
    span = max((int(c.max()) for c in (wend, rend, mstart) if len(c)), default=origin) - origin
    # The page reads int32s: a launch longer than 2.1 s is stored in units of `unit` ns.
    unit = max(1, -(-span // INT32_MAX))
    shown_at = np.flatnonzero(row_of(rloc) >= 0)  # ranges on the rows kept, in order
    marks_at = np.flatnonzero(row_of(mloc) >= 0)
    names = _first_seen(
        np.concatenate([np.asarray(r.name, np.int64)[shown_at], np.asarray(m.name, np.int64)[marks_at]])
    )
    name_of = {index: k for k, index in enumerate(names)}
    rs, re_ = (rstart[shown_at] - origin) // unit, (rend[shown_at] - origin) // unit
    ranges = _int32(row_of(rloc[shown_at]), _renamed(r.name, shown_at, name_of), rs, re_ - rs)
    marks = _int32(
        row_of(mloc[marks_at]), _renamed(m.name, marks_at, name_of), (mstart[marks_at] - origin) // unit
    )
    warps_at = np.flatnonzero(row_of(wloc) >= 0)
    warps = _int32(
        row_of(wloc[warps_at]), (wstart[warps_at] - origin) // unit, (wend[warps_at] - origin) // unit
    )
    shown = dict(zip(shown_at.tolist(), range(len(shown_at)), strict=True))  # range index -> position
    shown_marks = marks_at.tolist()
    return {
        "index": number,
        "kernel": launch.kernel,
        "grid": list(launch.grid),
        "block": list(launch.block),
        "span": span,
        "unit": unit,
        "rows": [[*where(loc)[:2], where(loc)[2], _role(roles, where(loc)[2])] for loc in kept],
        "names": [loaded.name(index) for index in names],
        "ranges": _b64(ranges),
        "marks": _b64(marks),
        "warps": _b64(warps),
        "kinds": _column(r.kind, list(shown), "i") if (np.asarray(r.kind) != 2).any() else None,
        "rp": _column(r.pval, list(shown), "d") if r.has_payloads else None,
        "rpt": _column(r.ptype, list(shown), "i") if r.has_payloads else None,
        "mp": _column(m.pval, shown_marks, "d") if m.has_payloads else None,
        "mpt": _column(m.ptype, shown_marks, "i") if m.has_payloads else None,
        "flows": _flows(flows, shown),
        "total_rows": len(order),
        "total_ranges": len(r),
        "total_marks": len(m),
        "shown_ranges": len(ranges) // 4,
        "shown_marks": len(marks) // 3,
        "occ": _occupancy(launch, sm_of, origin, span, unit),
    }


def _occupancy(launch: trace_mod.Launch, sm_of, origin: int, span: int, unit: int) -> dict | None:
    """Per SM, the mean number of resident warps in each of :data:`OCCUPANCY_BINS` equal
    steps of the launch (x100, as int32): a warp's share of a step is the time it ran in it.

    Exact and vectorised: the warp-time an SM holds before ``t`` is a sum of clipped ramps,
    so each step's is a difference of that sum at its two edges.
    """
    import numpy as np

    w = launch.warps
    if not len(w):
        return None
    start = np.frombuffer(w.start, dtype=np.int64) - origin
    end = np.frombuffer(w.end, dtype=np.int64) - origin
    loc = np.frombuffer(w.loc, dtype=np.int32).astype(np.int64)
    sm = launches_mod.warp_sms(loc, sm_of)
    span = max(span, 1)
    edges = np.linspace(0, span, OCCUPANCY_BINS + 1)
    sms, row = np.unique(sm, return_inverse=True)
    held = np.zeros((len(sms), OCCUPANCY_BINS + 1))
    order = np.argsort(row, kind="stable")
    cuts = np.searchsorted(row[order], np.arange(len(sms) + 1))
    for index in range(len(sms)):  # one SM's warps at a time: bounded memory
        mine = order[cuts[index] : cuts[index + 1]]
        ramps = np.clip(edges[None, :] - start[mine, None], 0, (end - start)[mine, None])
        held[index] = ramps.sum(axis=0)
    resident = np.diff(held, axis=1) / (span / OCCUPANCY_BINS)
    values = np.rint(resident * 100).astype(np.int32).ravel()
    return {
        "sms": [int(x) for x in sms],
        "bins": OCCUPANCY_BINS,
        "step": span / OCCUPANCY_BINS / unit,
        "peak": int(values.max()) if len(values) else 0,
        "data": _b64(array("i", values.tolist())),
    }


def _role(roles: Roles | None, warp: int) -> str | None:
    return roles.role(warp) if roles is not None and warp >= 0 else None


def _column(values: array, indices: list[int], typecode: str) -> str:
    """The values at ``indices``, as a base64 array of ``typecode`` (i: int32, d: float64)."""
    import numpy as np

    taken = np.asarray(values)[np.asarray(indices, np.int64)] if len(indices) else []
    return _b64(array(typecode, np.asarray(taken, "<i4" if typecode == "i" else "<f8").tobytes()))


def _counts(loc) -> dict[int, int]:
    """Records per location, as a dict of the locations present (counted, not sorted: a
    sort of millions of records is a large part of a report's time)."""
    found, counts = any_distinct(loc, counts=True)
    return dict(zip(found.tolist(), counts.tolist(), strict=True))


def _rows(kept: list[int], *columns):
    """A function giving each location's row among ``kept`` (-1: not kept), vectorised."""
    import numpy as np

    top = max([0, *kept, *(int(c.max()) for c in columns if len(c))]) + 1
    low = min([0, *(int(c.min()) for c in columns if len(c))])
    table = np.full(top - low, -1, np.int64)
    table[np.asarray(kept, np.int64) - low] = np.arange(len(kept))
    return lambda loc: table[np.asarray(loc, np.int64) - low]


def _first_seen(values) -> list[int]:
    """The distinct values in the order they first appear."""
    import numpy as np

    distinct, first = np.unique(values, return_index=True)
    return distinct[np.argsort(first, kind="stable")].tolist()


def _renamed(names, at, name_of: dict[int, int]):
    """The names of the records at ``at``, as indices into the page's own name list."""
    import numpy as np

    chosen = np.asarray(names, np.int64)[at]
    if not len(chosen):
        return chosen
    distinct, inverse = np.unique(chosen, return_inverse=True)
    return np.asarray([name_of[v] for v in distinct.tolist()], np.int64)[inverse]


def _int32(*columns) -> array:
    """The columns interleaved (one record after another) as an ``array('i')``."""
    import numpy as np

    stacked = np.stack([np.asarray(c, np.int64) for c in columns], axis=1) if len(columns[0]) else []
    return array("i", np.asarray(stacked, "<i4").tobytes())


def _flows(flows: list[Flow], shown: dict[int, int]) -> str | None:
    """(source, target, edge) of each arrow whose two ranges are both embedded."""
    packed = array("i")
    for flow in flows:
        if flow.source in shown and flow.target in shown:
            packed.extend((shown[flow.source], shown[flow.target], flow.edge))
    return _b64(packed) if packed else None


def _b64(values: array) -> str:
    """Little-endian values (the page reads them as typed arrays), base64."""
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")
