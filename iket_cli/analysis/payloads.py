"""Payloads: the values CuTe DSL kernels attach to marks and to token ranges, per name.

``iket.mark("stage_full", stage)`` or ``iket.range_start("load", k_tile)`` record a value
beside the timestamp. Per kernel and event name this gives the payload type, how many
events carry one, and either the distinct values (when there are few) or their range.
Ranges are read at their start; where a range's end carries another value, a ``range end``
row follows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..model.reading import Opened
from ..model.trace import Columns, Trace
from ..model.vocab import PAYLOAD_TYPES

#: Up to this many distinct values are listed; more are summarised as min and max.
DISTINCT_SHOWN = 8


@dataclass
class PayloadRow:
    kernel: str
    kind: str  # "range", "range end" or "mark"
    name: str
    types: list[str]
    count: int  # events of this name that carry a payload
    distinct: int
    values: list[float] | None  # the distinct values, when at most DISTINCT_SHOWN
    min: float
    max: float

    def to_dict(self) -> dict:
        return asdict(self)


def payloads_capture(opened: Opened) -> list[dict]:
    """Per process of a capture: its label, trace path and payload rows (after the capture's
    filters, those of :func:`iket_cli.model.trace.select`)."""
    return [
        {"process": found.label, "trace": str(found.path), "payloads": payloads(trace)}
        for found, trace in opened.traces()
    ]


def payloads(trace: Trace) -> list[PayloadRow]:
    """One row per (kernel, kind, name) whose events carry payloads, in launch order."""
    import numpy as np

    found: dict[tuple[str, str, int], list] = {}
    for launch in trace.launches:
        for kind, columns, types, values in _sources(launch):
            keep = np.frombuffer(types, np.int32) > 0 if len(types) else np.zeros(0, bool)
            if not keep.any():
                continue
            names = np.frombuffer(columns.name, np.int32)[keep]
            kinds = np.frombuffer(types, np.int32)[keep]
            vals = np.frombuffer(values, np.float64)[keep]
            for index in dict.fromkeys(names.tolist()):
                chosen = names == index
                entry = found.setdefault((launch.kernel, kind, index), [[], []])
                entry[0].append(kinds[chosen])
                entry[1].append(vals[chosen])
    rows = []
    for (kernel, kind, index), (kinds, vals) in found.items():
        types = np.unique(np.concatenate(kinds))
        values = np.concatenate(vals)
        distinct = np.unique(values)
        rows.append(
            PayloadRow(
                kernel,
                kind,
                trace.name(index),
                [PAYLOAD_TYPES.get(int(t)) or f"type {int(t)}" for t in types],
                len(values),
                len(distinct),
                distinct.tolist() if len(distinct) <= DISTINCT_SHOWN else None,
                float(values.min()),
                float(values.max()),
            )
        )
    return _without_equal_ends(rows)


def _sources(launch):
    """(kind, columns, payload types, payload values) of one launch's events."""
    ranges, marks = launch.ranges, launch.markers
    yield "range", ranges, ranges.ptype, ranges.pval
    yield "range end", ranges, ranges.ptype_end, ranges.pval_end
    yield "mark", marks, marks.ptype, marks.pval


def _without_equal_ends(rows: list[PayloadRow]) -> list[PayloadRow]:
    """A range's end payloads are shown only where they say something its start did not."""
    starts = {(r.kernel, r.name): r for r in rows if r.kind == "range"}
    kept = []
    for row in rows:
        start = starts.get((row.kernel, row.name))
        if row.kind == "range end" and start is not None and _same(row, start):
            continue
        kept.append(row)
    return kept


def _same(a: PayloadRow, b: PayloadRow) -> bool:
    return (a.types, a.count, a.distinct, a.values, a.min, a.max) == (
        b.types,
        b.count,
        b.distinct,
        b.values,
        b.min,
        b.max,
    )


def type_conflicts(columns: Columns, kind: str) -> list[tuple[int, list[int]]]:
    """(name index, payload types) for each name recorded with more than one payload type
    (with and without a payload counts as two: "none" is type 0)."""
    if not len(columns.ptype):
        return []
    seen: dict[int, set[int]] = {}
    for index, ptype in zip(columns.name, columns.ptype, strict=True):
        seen.setdefault(index, set()).add(ptype)
    if kind == "range":  # a token range's end must carry what its start carried
        for index, start, end in zip(columns.name, columns.ptype, columns.ptype_end, strict=True):
            if start != end:
                seen[index].add(end)
    return [(index, sorted(types)) for index, types in seen.items() if len(types) > 1]
