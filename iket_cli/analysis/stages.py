"""What bounds a pipelined kernel: per stage its work, waiting, period, and the stage that bounds it.

A *stage* is a DAG region (a range name of an ``iket.dag`` edge) on the warps that run it,
or, without a DAG, each range name on its role's warps (``kernel_symbols.json``). Per kernel
(launches pooled), every instance counted, whatever cap the drawn arrows have:

* ``busy``: the stage's range time minus the time inside wait ranges nested in it, over
  its warps' lifetime; ``waiting``: the time of its warps inside wait ranges (token or push
  ranges whose name matches the wait pattern, ``wait*`` by default: waiting, not work);
  ``idle``: the rest.
* ``period``: the median gap between consecutive starts of the stage on a warp. Medians
  are nearest-rank, as everywhere in iket (:func:`.stats.median`): a value that occurred.
* ``starved`` (a consumer stage): per instance, how long its warp was free before its
  input was ready: ``source end − previous end`` on the consumer's warp (the previous
  instance of the stage, or the warp's start), at most the gap before the instance; over
  several producers, the last to finish. The median over instances.
* ``slack`` (a producer stage): how long its output waited for a busy consumer:
  ``min(consumer start, consumer's previous end) − source end``, never negative; the first
  consumer to take it. The median over instances.
* ``fill``: from a CTA's first warp start to the last stage's first instance; ``drain``:
  from the first stage's last instance to the CTA's last warp end (medians over CTAs).
* ``work``: the mean work per instance (its time minus the waits nested in it).
* the *bound*: among producers whose consumers waited for them (``starved`` above one
  timer step), the busiest; where no consumer waited, among consumers whose producers'
  output waited for them (``slack`` above one timer step), the busiest. Without a DAG no
  stage is known to wait for another, and the busiest stage is named as such. What the
  period would become if the bound stage were as fast as the next slowest: about that
  stage's work per instance (in a coupled pipeline every stage's period is the bound's, so
  the periods cannot say it).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, fields
from typing import Any

from ..model.annotations import Dag, Roles
from ..model.trace import Trace
from ..model.vocab import WAIT_PATTERN
from . import bound as bound_mod
from . import flows as flows_mod
from .stats import distinct, median


@dataclass
class Stage:
    name: str
    role: str | None
    instances: int
    warps: int
    busy: float | None  # shares of the warps' lifetime
    waiting: float | None
    idle: float | None
    period_ns: float | None
    work_ns: float | None  # mean work per instance (its time minus the waits inside it)
    starved_ns: float | None  # median per instance, where it consumes an edge
    slack_ns: float | None  # median per instance, where it produces for an edge


#: The stage table's columns (``iket show --pipeline --format csv``, SQL's ``stages``): the
#: fields of :class:`Stage`, its ``name`` called ``stage``.
STAGE_COLUMNS = ("stage", *(f.name for f in fields(Stage) if f.name != "name"))


@dataclass
class Pipeline:
    kernel: str
    launches: int
    stages: list[Stage]
    fill_ns: float | None
    drain_ns: float | None
    bound: str | None  # the bounding stage's name; None when no stage is
    consumer: str | None  # the stage that waits for it
    period_if_faster_ns: float | None
    sentence: str
    edges: list[str] = field(default_factory=list)


def pipelines(
    trace: Trace, dags: list[Dag], roles: Roles | None, wait_pattern: str = WAIT_PATTERN
) -> list[Pipeline]:
    """One :class:`Pipeline` per kernel that has stages (a DAG's regions, or roles)."""
    import numpy as np

    paired = flows_mod.pair(trace, dags) if dags else flows_mod.Pairing()
    edges = [edge for dag in dags for edge in dag.edges]
    found = []
    for kernel, launches, table in _kernel_tables(trace):
        stages = _stage_keys(trace, table, edges, roles, wait_pattern)
        if not stages:
            continue
        arrows = _arrows_of(np, paired, table)
        found.append(
            _pipeline(np, trace, table, kernel, launches, stages, edges, arrows, wait_pattern, roles)
        )
    return found


def _kernel_tables(trace: Trace):
    """(kernel, its launch count, its :class:`_Table`) for each kernel that recorded ranges."""
    kernels: dict[str, list[int]] = {}
    for number, launch in enumerate(trace.launches):
        kernels.setdefault(launch.kernel, []).append(number)
    for kernel, numbers in kernels.items():
        table = _Table(trace, numbers)
        if table.size:
            yield kernel, len(numbers), table


#: How ``iket diff`` names a stage's period row: ``load (period)``.
PERIOD_ROW = "{stage} (period)"


def period_gaps(trace: Trace, dags: list[Dag], roles: Roles | None) -> dict[tuple[str, str], list[int]]:
    """Per (kernel, stage period row): every gap between consecutive starts of the stage on a
    warp, the instances ``iket diff`` compares (their median is the stage's period)."""
    import numpy as np

    edges = [edge for dag in dags for edge in dag.edges]
    found: dict[tuple[str, str], list[int]] = {}
    index_of = {name: i for i, name in enumerate(trace.strings)}
    for kernel, _launches, table in _kernel_tables(trace):
        for name, role in _stage_keys(trace, table, edges, roles, WAIT_PATTERN):
            gaps = _gaps(np, table, np.flatnonzero(table.name == index_of[name]))
            label = PERIOD_ROW.format(stage=name if role is None else f"{name} on {role}")
            found[(kernel, label)] = gaps.tolist()
    return found


class _Table:
    """A kernel's ranges over its launches as numpy columns; a warp is (launch, location)."""

    def __init__(self, trace: Trace, numbers: list[int]) -> None:
        import numpy as np

        names, warps, starts, ends, ctas = [], [], [], [], []
        life_warp, life_start, life_end = [], [], []
        self.offset: dict[int, int] = {}
        count = len(trace.locations)
        cta_of_loc = flows_mod.cta_numbers(np, trace)  # a CTA is (launch, this number)
        per_launch = int(cta_of_loc.max()) + 1 if count else 1
        total = 0
        for number in numbers:
            launch = trace.launches[number]
            r, w = launch.ranges, launch.warps
            self.offset[number] = total
            total += len(r)
            loc = np.asarray(r.loc, dtype=np.int64)
            names.append(np.asarray(r.name, dtype=np.int64))
            warps.append(number * count + loc)
            starts.append(np.asarray(r.start, dtype=np.int64))
            ends.append(np.asarray(r.end, dtype=np.int64))
            ctas.append(number * per_launch + cta_of_loc[loc] if len(loc) else loc)
            life_warp.append(number * count + np.asarray(w.loc, dtype=np.int64))
            life_start.append(np.asarray(w.start, dtype=np.int64))
            life_end.append(np.asarray(w.end, dtype=np.int64))
        self.name = np.concatenate(names) if names else np.zeros(0, np.int64)
        self.warp = np.concatenate(warps)
        self.start = np.concatenate(starts)
        self.end = np.concatenate(ends)
        self.cta = np.concatenate(ctas)
        self.size = len(self.name)
        self.warp_id = np.asarray([p.get("warpId", 0) for p in trace.locations], dtype=np.int64)
        self.count = count
        lw, ls, le = np.concatenate(life_warp), np.concatenate(life_start), np.concatenate(life_end)
        # each warp's lifetime, by its key; a warp without one spans its own ranges
        keys = distinct(np.concatenate([self.warp, lw]))
        first = np.full(len(keys), np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full(len(keys), np.iinfo(np.int64).min, dtype=np.int64)
        at, place = np.searchsorted(keys, self.warp), np.searchsorted(keys, lw)
        lived = np.zeros(len(keys), bool)
        lived[place] = True
        own = np.flatnonzero(~lived[at])  # the ranges of warps without a lifetime (ufunc.at is slow)
        np.minimum.at(first, at[own], self.start[own])
        np.maximum.at(last, at[own], self.end[own])
        first[place], last[place] = ls, le
        self.keys, self.born, self.died = keys, first, last
        cta_of_key = np.zeros(len(keys), dtype=np.int64)
        cta_of_key[at] = self.cta
        self.key_cta = cta_of_key

    def born_of(self, warps):
        """The lifetime start of each warp key in ``warps``."""
        import numpy as np

        return self.born[np.searchsorted(self.keys, warps)]

    def life(self, warps) -> int:
        import numpy as np

        at = np.searchsorted(self.keys, warps)
        return int((self.died[at] - self.born[at]).sum())


def _stage_keys(trace, table, edges, roles, wait_pattern) -> list[tuple[str, str | None]]:
    """(name, role) per stage: the DAG's regions in order, else each name per role."""

    present = {trace.name(int(i)) for i in distinct(table.name)}
    if edges:
        order: list[str] = []
        for edge in edges:
            for name in (edge.source, edge.target):
                if name in present and name not in order:
                    order.append(name)
        return [(name, None) for name in order]
    if roles is None:
        return []
    found = []
    for index in distinct(table.name):
        name = trace.name(int(index))
        if fnmatch.fnmatchcase(name, wait_pattern):
            continue
        warps = distinct(table.warp[table.name == index])
        for role in sorted({roles.role(int(table.warp_id[w % table.count])) or "" for w in warps}):
            found.append((name, role or None))
    return found


def _pipeline(np, trace, table, kernel, launches, stages, edges, arrows, wait_pattern, roles) -> Pipeline:
    index_of = {name: i for i, name in enumerate(trace.strings)}
    waits = [i for i, name in enumerate(trace.strings) if fnmatch.fnmatchcase(name, wait_pattern)]
    is_wait = np.isin(table.name, waits)
    role_of_range = None
    if roles is not None:
        per_location = np.asarray([roles.role(int(w)) or "" for w in table.warp_id], dtype=object)
        role_of_range = per_location[table.warp % table.count]
    members: dict[tuple, Any] = {}
    for name, role in stages:
        mask = table.name == index_of[name]
        if role is not None and role_of_range is not None:
            mask &= role_of_range == role
        members[(name, role)] = np.flatnonzero(mask)
    gaps = {key: _previous_end(np, table, rows) for key, rows in members.items()}
    starved, slack = _edge_waits(np, table, members, gaps, edges, arrows)
    rows = [
        _stage(np, table, key, members[key], is_wait, starved.get(key[0]), slack.get(key[0]))
        for key in stages
    ]
    if role_of_range is not None:  # a DAG's region: named by the role of the warps that run it
        for row, key in zip(rows, stages, strict=True):
            found = {r for r in role_of_range[members[key]] if r}
            row.role = row.role or (found.pop() if len(found) == 1 else None)
    fill, drain = _fill_drain(np, table, members[stages[0]], members[stages[-1]])
    labels = [f"{e.source} -> {e.target}" for e in edges]
    name, consumer, faster, sentence = bound_mod.bounded(rows, labels)
    return Pipeline(kernel, launches, rows, fill, drain, name, consumer, faster, sentence, labels)


def _stage(np, table, key, rows, is_wait, starved, slack) -> Stage:
    name, role = key
    if not len(rows):
        return Stage(name, role, 0, 0, None, None, None, None, None, None, None)
    warps = distinct(table.warp[rows])
    lifetime = table.life(warps)
    spent = int((table.end[rows] - table.start[rows]).sum())
    on_warps = is_wait & np.isin(table.warp, warps)
    waited = int((table.end[on_warps] - table.start[on_warps]).sum())
    inside = _overlap(np, table, rows, np.flatnonzero(on_warps))
    busy = (spent - inside) / lifetime if lifetime else None
    waiting = waited / lifetime if lifetime else None
    idle = None if busy is None else max(0.0, 1.0 - busy - (waiting or 0.0))
    return Stage(
        name,
        role,
        len(rows),
        len(warps),
        busy,
        waiting,
        idle,
        _period(np, table, rows),
        (spent - inside) / len(rows),
        None if starved is None else median(starved),
        None if slack is None else median(slack),
    )


def _order(np, table, rows):
    """``rows`` sorted by (warp, start)."""
    return rows[np.lexsort((table.start[rows], table.warp[rows]))]


def _gaps(np, table, rows):
    """The gaps between consecutive starts of ``rows`` on a warp."""
    ordered = _order(np, table, rows)
    same = table.warp[ordered][1:] == table.warp[ordered][:-1]
    return np.diff(table.start[ordered])[same]


def _period(np, table, rows) -> float | None:
    gaps = _gaps(np, table, rows)
    return median(gaps)


def _previous_end(np, table, rows):
    """Per range row (an array over the table): the end of the stage's previous instance on
    its warp, or the warp's start for its first; -1 for rows outside the stage."""
    ordered = _order(np, table, rows)
    previous = np.full(table.size, -1, dtype=np.int64)
    if not len(ordered):
        return previous
    ends = table.end[ordered]
    before = np.concatenate([[0], ends[:-1]])
    warps = table.warp[ordered]
    first = np.concatenate([[True], warps[1:] != warps[:-1]])
    previous[ordered] = np.where(first, table.born_of(warps), before)
    return previous


def _arrows_of(np, paired, table):
    """The kernel's arrows as (edge, source row, target row) columns over its table; None if none."""
    if not len(paired):
        return None
    mine = np.isin(paired.launch, list(table.offset))
    if not mine.any():
        return None
    offset = np.zeros(int(paired.launch.max()) + 1, dtype=np.int64)
    offset[list(table.offset)] = list(table.offset.values())
    launch = paired.launch[mine]
    return paired.edge[mine], offset[launch] + paired.source[mine], offset[launch] + paired.target[mine]


def _edge_waits(np, table, members, gaps, edges, arrows):
    """Per stage name: starved time per consumer instance, slack per producer instance."""
    starved: dict[str, Any] = {}
    slack: dict[str, Any] = {}
    stage_of = {key[0]: key for key in members}
    if arrows is None:
        return starved, slack
    which, src_all, dst_all = arrows
    for e, edge in enumerate(edges):
        mine = which == e
        if not mine.any() or edge.target not in stage_of:
            continue
        src, dst = src_all[mine], dst_all[mine]
        prev = gaps[stage_of[edge.target]][dst]
        prev = np.where(prev < 0, table.start[dst], prev)
        s_end, t_start = table.end[src], table.start[dst]
        waited = np.clip(np.minimum(s_end, t_start) - prev, 0, None)
        kept = np.clip(np.minimum(t_start, prev) - s_end, 0, None)
        per_target = np.zeros(table.size, dtype=np.int64)
        np.maximum.at(per_target, dst, waited)
        starved[edge.target] = np.concatenate(
            [starved.get(edge.target, np.zeros(0)), per_target[distinct(dst)]]
        )
        per_source = np.full(table.size, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(per_source, src, kept)
        slack[edge.source] = np.concatenate([slack.get(edge.source, np.zeros(0)), per_source[distinct(src)]])
    return starved, slack


def _overlap(np, table, rows, waits) -> int:
    """Time of the wait ranges ``waits`` inside the stage's ranges ``rows`` on the same warp."""
    if not len(rows) or not len(waits):
        return 0
    ordered = _order(np, table, rows)
    low = int(table.start.min())  # relative times: the GPU's clock counts from the epoch
    span = int(table.end.max()) - low + 1
    keys = table.warp[ordered] * span + (table.start[ordered] - low)
    probe = table.warp[waits] * span + (table.start[waits] - low)
    at = np.searchsorted(keys, probe, side="right") - 1
    ok = at >= 0
    holder = ordered[np.clip(at, 0, None)]
    same = ok & (table.warp[holder] == table.warp[waits])
    inside = np.minimum(table.end[waits], table.end[holder]) - np.maximum(
        table.start[waits], table.start[holder]
    )
    return int(np.clip(inside, 0, None)[same].sum())


def _fill_drain(np, table, first_rows, last_rows) -> tuple[float | None, float | None]:
    """Medians over CTAs: first warp start to the last stage's first start (fill), and the
    first stage's last end to the last warp end (drain)."""
    ctas = int(table.key_cta.max()) + 1 if len(table.key_cta) else 0
    if not ctas or not len(first_rows) or not len(last_rows):
        return None, None
    begin = np.full(ctas, np.iinfo(np.int64).max, dtype=np.int64)
    finish = np.full(ctas, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(begin, table.key_cta, table.born)
    np.maximum.at(finish, table.key_cta, table.died)
    opened = np.full(ctas, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(opened, table.cta[last_rows], table.start[last_rows])
    closed = np.full(ctas, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(closed, table.cta[first_rows], table.end[first_rows])
    fills = (opened - begin)[opened != np.iinfo(np.int64).max]
    drains = (finish - closed)[closed != np.iinfo(np.int64).min]
    return median(fills), median(drains)
