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

from collections import defaultdict
from dataclasses import dataclass, field, replace

from ..model.annotations import Dag
from ..model.trace import Trace

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
    """Every arrow of a trace's DAG edges (no cap), and the edges that could not be paired."""

    arrows: list[Flow] = field(default_factory=list)
    undecided: list[Undecided] = field(default_factory=list)


def flows(trace: Trace, dags: list[Dag], cap: int = MAX_FLOWS) -> list[Flow]:
    """The arrows to draw: at most ``cap`` per launch."""
    return capped(pair(trace, dags).arrows, cap)


def capped(arrows: list[Flow], cap: int = MAX_FLOWS) -> list[Flow]:
    """``arrows``, at most ``cap`` of each launch."""
    drawn: dict[int, int] = defaultdict(int)
    kept = []
    for flow in arrows:
        if drawn[flow.launch] < cap:
            drawn[flow.launch] += 1
            kept.append(flow)
    return kept


def pair(trace: Trace, dags: list[Dag]) -> Pairing:
    """Every arrow the DAGs' edges draw in ``trace``, launch by launch, and what could not be."""
    edges = [edge for dag in dags for edge in dag.edges]
    result = Pairing()
    if not edges:
        return result
    index_of = {name: i for i, name in enumerate(trace.strings)}
    for number, launch in enumerate(trace.launches):
        by_cta = _instances(trace, launch)
        for e, edge in enumerate(edges):
            source, target = index_of.get(edge.source), index_of.get(edge.target)
            if source is None or target is None:
                continue
            missed: Undecided | None = None
            for per_warp in by_cta.values():
                sources = {loc: names[source] for loc, names in per_warp.items() if names.get(source)}
                targets = {loc: names[target] for loc, names in per_warp.items() if names.get(target)}
                if not sources or not targets:
                    continue
                made = _by_payload(launch.ranges, sources, targets)
                if made is None:
                    made = _by_order(sources, targets)
                if made is None:
                    if missed is None:
                        label = f"{edge.source} -> {edge.target}"
                        counts = (_counts(sources), _counts(targets))
                        missed = Undecided(number, e, launch.kernel, label, *counts, ctas=0)
                    missed = replace(missed, ctas=missed.ctas + 1)
                    continue
                result.arrows += [Flow(number, s, t, e) for s, t in made]
            if missed is not None:
                result.undecided.append(missed)
    return result


def _counts(per_warp: dict[int, list[int]]) -> tuple[int, ...]:
    return tuple(len(per_warp[loc]) for loc in sorted(per_warp))


def _by_order(sources: dict[int, list[int]], targets: dict[int, list[int]]) -> list[tuple[int, int]] | None:
    """Rule 2: the k-th on each source warp feeds the k-th on each target warp, where every
    warp of both stages runs as many instances; None otherwise."""
    counts = {len(v) for v in sources.values()} | {len(v) for v in targets.values()}
    if len(counts) != 1:
        return None
    return [
        (s, t) for src in sources.values() for dst in targets.values() for s, t in zip(src, dst, strict=True)
    ]


def _by_payload(columns, sources: dict[int, list[int]], targets: dict[int, list[int]]):
    """Rule 1: the j-th instance carrying payload p on a source warp feeds the j-th carrying p
    on each target warp; None unless every instance of both stages carries a payload."""
    if not columns.has_payloads:
        return None
    keys = {}
    for group in (sources, targets):
        for indices in group.values():
            for i in indices:
                key = _payload(columns, i)
                if key is None:
                    return None
                keys[i] = key
    made = []
    for src in sources.values():
        for dst in targets.values():
            by_value: dict = defaultdict(list)
            for i in dst:
                by_value[keys[i]].append(i)
            seen: dict = defaultdict(int)
            for s in src:
                key = keys[s]
                j = seen[key]
                seen[key] += 1
                if j < len(by_value[key]):
                    made.append((s, by_value[key][j]))
    return made


def _payload(columns, i: int) -> float | None:
    """A range's payload: its start event's, else its end event's; None where it has none."""
    if columns.ptype[i]:
        return columns.pval[i]
    if len(columns.ptype_end) > i and columns.ptype_end[i]:
        return columns.pval_end[i]
    return None


def _instances(trace: Trace, launch) -> dict:
    """CTA -> warp location -> range name index -> range indices by start time."""
    tree: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    r = launch.ranges
    for i in range(len(r)):
        loc = r.loc[i]
        where = trace.locations[loc] if 0 <= loc < len(trace.locations) else None
        if where is None:
            continue
        tree[tuple(where["ctaId"])][loc][r.name[i]].append(i)
    for per_warp in tree.values():
        for by_name in per_warp.values():
            for indices in by_name.values():
                indices.sort(key=lambda i: r.start[i])
    return tree
