"""Dataflow arrows: which range instance fed which, from a DAG's edges between region names.

A DAG edge ``load -> reduce`` says that a ``load`` range produces what a ``reduce`` range
consumes, without saying which instance feeds which. Within one CTA of one launch, an
instance's iteration is its order *on its own warp*; the rules, first that applies:

1. **By payload**: where every instance of both stages in the CTA carries a payload (a tile
   or stage index), the j-th instance carrying payload p on a source warp feeds the j-th
   instance carrying p on each target warp. A repeating ring index pairs right, and so do
   round-robin producers and consumers that take tiles out of order.
2. **By order**: where every warp of both stages runs the same number of instances, the
   k-th on each source warp feeds the k-th on each target warp: one producer warp to several
   consumers, several cooperating producer warps to one consumer, N to M.
3. Otherwise no rule can decide: no arrow is drawn for that edge in that CTA, and the edge
   is reported (:class:`Undecided`, the lint's ``unpaired-edge``). Never a wrong arrow.

An arrow runs from the end of its source range to the start of its target range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.annotations import Dag
from ..model.trace import Trace
from .stats import distinct

#: At most this many arrows per launch are drawn: a picture, not a census.
MAX_FLOWS = 20_000


@dataclass(frozen=True)
class Flow:
    """One arrow: the launch and the two ranges (indices into the launch's range columns)."""

    launch: int
    source: int
    target: int
    edge: int  # index of the edge in the DAGs' edges, in order


@dataclass(frozen=True)
class Undecided:
    """An edge no rule could pair in some CTA of a launch: the first such CTA's counts."""

    launch: int
    edge: int
    kernel: str
    label: str  # ``source -> target``
    source_counts: tuple[int, ...]  # instances per source warp
    target_counts: tuple[int, ...]  # instances per target warp
    ctas: int = 1  # how many CTAs of the launch it happened in


@dataclass
class Pairing:
    """Every arrow of a trace's DAG edges (no cap), as columns, and the edges that could not
    be paired. ``arrows`` gives them as :class:`Flow` records."""

    launch: Any = None  # numpy int64 columns, one row an arrow
    source: Any = None
    target: Any = None
    edge: Any = None
    undecided: list[Undecided] = field(default_factory=list)

    def __len__(self) -> int:
        return 0 if self.launch is None else len(self.launch)

    @property
    def arrows(self) -> list[Flow]:
        """Every arrow as a record (for a picture: :meth:`drawn` caps them)."""
        return self._records(slice(None))

    def drawn(self, cap: int = MAX_FLOWS) -> list[Flow]:
        """At most ``cap`` arrows of each launch, in order: what the report and Perfetto draw."""
        import numpy as np

        if not len(self):
            return []
        first = np.searchsorted(self.launch, self.launch)  # arrows come launch by launch
        return self._records(np.flatnonzero(np.arange(len(self.launch)) - first < cap))

    def _records(self, rows) -> list[Flow]:
        if not len(self):
            return []
        columns = (self.launch[rows], self.source[rows], self.target[rows], self.edge[rows])
        return [Flow(*row) for row in zip(*(c.tolist() for c in columns), strict=True)]


def flows(trace: Trace, dags: list[Dag], cap: int = MAX_FLOWS) -> list[Flow]:
    """The arrows to draw: at most ``cap`` per launch."""
    return pair(trace, dags).drawn(cap)


def pair(trace: Trace, dags: list[Dag]) -> Pairing:
    """Every arrow the DAGs' edges draw in ``trace``, launch by launch, and what could not be.

    Vectorised (numpy): each instance gets its rank on its warp (and, where payloads pair,
    its rank among the instances of its warp carrying the same payload); an arrow joins a
    source and a target instance of one CTA with the same key."""
    import numpy as np

    edges = [edge for dag in dags for edge in dag.edges]
    if not edges:
        return Pairing()
    index_of = {name: i for i, name in enumerate(trace.strings)}
    cta_of_loc = cta_numbers(np, trace)
    parts: list[tuple] = []
    undecided: list[Undecided] = []
    for number, launch in enumerate(trace.launches):
        r = launch.ranges
        if not len(r):
            continue
        names = np.asarray(r.name, dtype=np.int64)
        locs = np.asarray(r.loc, dtype=np.int64)
        valid = (locs >= 0) & (locs < len(cta_of_loc))
        ctas = np.where(valid, cta_of_loc[np.clip(locs, 0, max(len(cta_of_loc) - 1, 0))], -1)
        starts = np.asarray(r.start, dtype=np.int64)
        payload, carried = _payloads(np, r)
        for e, edge in enumerate(edges):
            source, target = index_of.get(edge.source), index_of.get(edge.target)
            if source is None or target is None:
                continue
            src = np.flatnonzero((names == source) & valid)
            dst = np.flatnonzero((names == target) & valid)
            made, missed = _pair_edge(np, src, dst, locs, ctas, starts, payload, carried)
            if len(made[0]):
                parts.append((np.full(len(made[0]), number), made[0], made[1], np.full(len(made[0]), e)))
            if missed is not None:
                counts, count = missed
                label = f"{edge.source} -> {edge.target}"
                undecided.append(Undecided(number, e, launch.kernel, label, *counts, ctas=count))
    if not parts:
        return Pairing(undecided=undecided)
    columns = [np.concatenate([part[i] for part in parts]).astype(np.int64) for i in range(4)]
    return Pairing(*columns, undecided=undecided)


def cta_numbers(np, trace: Trace):
    """A number per location: its CTA's, equal for the locations of one CTA."""
    seen: dict[tuple, int] = {}
    return np.asarray(
        [seen.setdefault(tuple(p.get("ctaId", ())), len(seen)) for p in trace.locations], dtype=np.int64
    )


def _payloads(np, columns):
    """Each range's payload (its start event's, else its end event's) and whether it has one."""
    n = len(columns)
    if not columns.has_payloads:
        return np.zeros(n), np.zeros(n, dtype=bool)
    kind, value = np.asarray(columns.ptype), np.asarray(columns.pval, dtype=np.float64)
    if len(columns.ptype_end) == n:
        kind_end, value_end = np.asarray(columns.ptype_end), np.asarray(columns.pval_end, dtype=np.float64)
        return np.where(kind != 0, value, value_end), (kind != 0) | (kind_end != 0)
    return value, kind != 0


def _pair_edge(np, src, dst, locs, ctas, starts, payload, carried):
    """The arrows of one edge in one launch: (source rows, target rows), and, where some CTA
    could not be paired, ((source counts, target counts) of the first such CTA, how many)."""
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if not len(src) or not len(dst):
        return empty, None
    both = np.intersect1d(ctas[src], ctas[dst])
    src, dst = src[np.isin(ctas[src], both)], dst[np.isin(ctas[dst], both)]
    if not len(src):
        return empty, None
    # rule 1 where every instance of both stages in the CTA carries a payload
    bare = distinct(np.concatenate([ctas[src][~carried[src]], ctas[dst][~carried[dst]]]))
    by_payload = ~np.isin(both, bare)
    # rule 2 where every warp of both stages in the CTA runs as many instances (each stage's own)
    low = np.full(len(both), np.iinfo(np.int64).max)
    high = np.zeros(len(both), dtype=np.int64)
    for side in (src, dst):
        warps, per_warp = distinct(locs[side], counts=True)
        warp_cta = np.searchsorted(both, _cta_of(np, locs, ctas, side, warps))
        np.minimum.at(low, warp_cta, per_warp)
        np.maximum.at(high, warp_cta, per_warp)
    by_order = (low == high) & ~by_payload
    decided = by_payload | by_order
    ok_src, ok_dst = np.isin(ctas[src], both[decided]), np.isin(ctas[dst], both[decided])
    pay_src, pay_dst = np.isin(ctas[src], both[by_payload]), np.isin(ctas[dst], both[by_payload])
    rank_src = _ranks(np, src, locs, starts, payload, pay_src)
    rank_dst = _ranks(np, dst, locs, starts, payload, pay_dst)
    value_src = np.where(pay_src, payload[src], 0.0)[ok_src]
    value_dst = np.where(pay_dst, payload[dst], 0.0)[ok_dst]
    _, value_code = np.unique(np.concatenate([value_src, value_dst]), return_inverse=True)
    values = int(value_code.max()) + 1 if len(value_code) else 1
    depth = int(max(rank_src.max(initial=0), rank_dst.max(initial=0))) + 1
    code = ((np.concatenate([ctas[src][ok_src], ctas[dst][ok_dst]]) * values + value_code.reshape(-1)) * depth
            + np.concatenate([rank_src[ok_src], rank_dst[ok_dst]]).astype(np.int64))  # fmt: skip
    key_src, key_dst = code[: int(ok_src.sum())], code[int(ok_src.sum()) :]
    made = _join(np, src[ok_src], key_src, dst[ok_dst], key_dst)
    missed = None
    if not decided.all():
        first = both[~decided][0]
        counts = tuple(
            tuple(int(c) for _, c in sorted(_warp_counts(np, side[ctas[side] == first], locs)))
            for side in (src, dst)
        )
        missed = (counts, int((~decided).sum()))
    return made, missed


def _cta_of(np, locs, ctas, rows, warps):
    """The CTA of each warp in ``warps`` (locations of ``rows``)."""
    order = np.argsort(locs[rows], kind="stable")
    at = np.searchsorted(locs[rows][order], warps)
    return ctas[rows][order][at]


def _warp_counts(np, rows, locs):
    warps, counts = distinct(locs[rows], counts=True)
    return list(zip(warps.tolist(), counts.tolist(), strict=True))


def _ranks(np, rows, locs, starts, payload, by_payload):
    """Each row's rank on its warp by start time; where ``by_payload``, its rank among the
    rows of its warp carrying the same payload."""
    value = np.where(by_payload, payload[rows], 0.0)
    order = np.lexsort((starts[rows], value, locs[rows]))
    group = np.stack([locs[rows][order], value[order]])
    new = np.concatenate([[True], (group[:, 1:] != group[:, :-1]).any(axis=0)])
    index = np.arange(len(order))
    first = np.maximum.accumulate(np.where(new, index, 0))
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = index - first
    return ranks.astype(np.float64)


def _join(np, left, left_keys, right, right_keys):
    """Every (left row, right row) whose keys (int64) are equal: a many-to-many join."""
    if not len(left) or not len(right):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lorder, rorder = np.argsort(left_keys, kind="stable"), np.argsort(right_keys, kind="stable")
    lsorted, rsorted = left_keys[lorder], right_keys[rorder]
    groups = np.intersect1d(lsorted, rsorted)
    lstart, lend = np.searchsorted(lsorted, groups), np.searchsorted(lsorted, groups, side="right")
    rstart, rend = np.searchsorted(rsorted, groups), np.searchsorted(rsorted, groups, side="right")
    lcount, rcount = lend - lstart, rend - rstart
    sizes = lcount * rcount
    total = int(sizes.sum())
    if not total:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    owner = np.repeat(np.arange(len(groups)), sizes)
    within = np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    li = lstart[owner] + within // rcount[owner]
    ri = rstart[owner] + within % rcount[owner]
    return left[lorder[li]], right[rorder[ri]]
