"""One trace of many: the repeats of one process (``iket profile --repeat N``) as one.

Each trace has its own string and location tables; pooling joins them and translates each
trace's indices, so that a range name or a warp location is one index across the repeats."""

from __future__ import annotations

import json
from array import array
from dataclasses import fields

from .trace import Columns, Launch, Trace


def pooled(traces: list[Trace]) -> Trace:
    """One trace holding the launches of all ``traces`` (the repeats of one process), their
    string and location tables joined: each trace's indices are translated into the joined
    tables, so that a range name or a warp location is one index across them all."""
    import numpy as np

    if len(traces) == 1:
        return traces[0]
    strings: dict[str, int] = {}
    places: dict[str, int] = {}
    locations: list[dict] = []
    launches: list[Launch] = []
    for trace in traces:
        names = np.array([strings.setdefault(text, len(strings)) for text in trace.strings], np.int64)
        locs = []
        for where in trace.locations:
            key = json.dumps(where, sort_keys=True)
            if key not in places:
                places[key] = len(locations)
                locations.append(where)
            locs.append(places[key])
        loc_map = np.array(locs, np.int64)
        for launch in trace.launches:
            moved = Launch(launch.kernel, launch.grid, launch.block, launch.grid_id, cluster=launch.cluster)
            moved.ranges = _translated(launch.ranges, names, loc_map)
            moved.markers = _translated(launch.markers, names, loc_map)
            moved.warps = _translated(launch.warps, None, loc_map)
            launches.append(moved)
    return Trace(traces[0].path, launches, list(strings), locations)


def _translated(columns: Columns, names, locs) -> Columns:
    """``columns`` with its name and location indices looked up in ``names`` and ``locs``
    (an index outside a table, such as a warp-less record's -1, is kept as it is)."""
    out = Columns(**{f.name: getattr(columns, f.name) for f in fields(Columns)})
    if names is not None:
        out.name = _looked_up(columns.name, names)
    out.loc = _looked_up(columns.loc, locs)
    return out


def _looked_up(column: array, table) -> array:
    import numpy as np

    if not len(column) or not len(table):
        return column
    values = np.asarray(column, dtype=np.int64)  # a copy: the trace's own column stays as it is
    inside = (values >= 0) & (values < len(table))
    values[inside] = table[values[inside]]
    out = array("i")
    out.frombytes(values.astype(np.int32).tobytes())
    return out
