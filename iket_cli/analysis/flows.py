"""Dataflow arrows: which range instance fed which, from a DAG's edges between region names.

A DAG edge ``load -> reduce`` says that a ``load`` range produces what a ``reduce`` range
consumes, without saying which instance feeds which. In a pipelined kernel the answer is
the order: within one CTA of one launch, the i-th ``load`` (by start time, over the CTA's
warps) feeds the i-th ``reduce`` of each warp that runs ``reduce``. That is the pairing
made here, for every edge of every DAG; an arrow runs from the end of its source range to
the start of its target range.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..model.annotations import Dag
from ..model.trace import Trace

#: At most this many arrows per launch: a picture, not a census.
MAX_FLOWS = 20_000


@dataclass(frozen=True)
class Flow:
    """One arrow: the launch and the two ranges (indices into the launch's range columns)."""

    launch: int
    source: int
    target: int
    edge: int  # index of the edge in the DAGs' edges, in order


def flows(trace: Trace, dags: list[Dag]) -> list[Flow]:
    """Every arrow the DAGs' edges draw in ``trace``, launch by launch."""
    edges = [edge for dag in dags for edge in dag.edges]
    if not edges:
        return []
    index_of = {name: i for i, name in enumerate(trace.strings)}
    found: list[Flow] = []
    for number, launch in enumerate(trace.launches):
        by_cta = _instances(trace, launch)
        made = []
        for e, edge in enumerate(edges):
            source, target = index_of.get(edge.source), index_of.get(edge.target)
            if source is None or target is None:
                continue
            for per_warp in by_cta.values():
                sources = sorted(
                    (i for warp in per_warp.values() for i in warp.get(source, [])),
                    key=lambda i: launch.ranges.start[i],
                )
                for warp in per_warp.values():
                    made += [
                        Flow(number, s, t, e) for s, t in zip(sources, warp.get(target, []), strict=False)
                    ]
        found += made[:MAX_FLOWS]
    return found


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
