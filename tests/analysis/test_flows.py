"""The dataflow arrows of a DAG edge, for every producer/consumer shape (issue 33, item 1).

Each trace here is built in memory: stages on warps, with or without a payload, in one or
two CTAs. Every arrow must join a source instance to the target instance of the same
iteration, and an edge no rule can pair must get no arrow and a lint finding.
"""

from __future__ import annotations

from array import array
from pathlib import Path

from iket_cli.analysis import flows, lint
from iket_cli.model.trace import Columns, Launch, Trace

from conftest import LOAD_MATH

INT32 = 5  # a payload type (vocab.PAYLOAD_TYPES)


def build(stages: list[tuple], ctas: int = 1, warps: int = 4) -> Trace:
    """``stages``: (name, warp, start, end, payload or None) per range, repeated in each CTA
    (CTA c's times shifted by c * 10**6)."""
    names = sorted({s[0] for s in stages})
    cols = Columns()
    payloads = any(s[4] is not None for s in stages)
    for cta in range(ctas):
        for name, warp, start, end, payload in stages:
            cols.name.append(names.index(name))
            cols.loc.append(cta * warps + warp)
            cols.start.append(start + cta * 10**6)
            cols.end.append(end + cta * 10**6)
            cols.kind.append(2)
            if payloads:
                cols.ptype.append(0 if payload is None else INT32)
                cols.pval.append(0.0 if payload is None else float(payload))
                cols.ptype_end.append(0)
                cols.pval_end.append(0.0)
    locations = [
        {"ctaId": [cta, 0, 0], "gpcId": 0, "smId": 0, "tpcId": 0, "warpId": w}
        for cta in range(ctas)
        for w in range(warps)
    ]
    launch = Launch("k", (ctas, 1, 1), (32 * warps, 1, 1), 1, ranges=cols, warps=Columns())
    return Trace(Path("t.trace.json"), [launch], names, locations)


def pairs(trace: Trace) -> list[tuple]:
    """Each arrow as ((source warp, source payload or start), (target warp, ...)), sorted."""
    r = trace.launches[0].ranges
    out = []
    for f in flows.flows(trace, LOAD_MATH):
        assert trace.name(r.name[f.source]) == "load" and trace.name(r.name[f.target]) == "math"
        ends = []
        for i in (f.source, f.target):
            where = trace.locations[r.loc[i]]
            ends.append((where["ctaId"][0], where["warpId"], r.start[i]))
        out.append(tuple(ends))
    return sorted(out)


def tile(k: int, warp: int, name: str, lag: int = 0, payload=None) -> tuple:
    """The k-th tile's instance of a stage: 100 ns long, tile k starts at 1000 k (+ lag)."""
    start = 1000 * k + lag
    return (name, warp, start, start + 100, payload)


def test_one_producer_warp_feeds_each_consumer_warp():
    stages = [tile(k, 0, "load") for k in range(4)]
    stages += [tile(k, w, "math", lag=200) for k in range(4) for w in (1, 2)]
    found = pairs(build(stages))
    assert len(found) == 8
    assert all(s[2] + 200 == t[2] for s, t in found), "tile k's load feeds tile k's math"


def test_cooperating_producer_warps_feed_one_consumer():
    """The shape measured on the H200: two warps load each tile together, one warp uses it."""
    stages = [tile(k, w, "load") for k in range(16) for w in (0, 1)]
    stages += [tile(k, 2, "math", lag=300) for k in range(16)]
    found = pairs(build(stages))
    assert len(found) == 32, "each math gets an arrow from both of its tile's loads"
    assert {t[2] - s[2] for s, t in found} == {300}, "the lag stays one tile's, never grows"
    assert {s[1] for s, _ in found} == {0, 1}


def test_n_producers_to_m_consumers_in_each_cta():
    stages = [tile(k, w, "load") for k in range(5) for w in (0, 1)]
    stages += [tile(k, w, "math", lag=50) for k in range(5) for w in (2, 3)]
    found = pairs(build(stages, ctas=2))
    assert len(found) == 2 * 5 * 2 * 2
    assert all(s[0] == t[0] and t[2] - s[2] == 50 for s, t in found), "within a CTA, same tile"


def test_round_robin_producers_pair_by_payload():
    stages = [tile(k, k % 2, "load", payload=k) for k in range(8)]
    stages += [tile(k, 2, "math", lag=400, payload=k) for k in range(8)]
    found = pairs(build(stages))
    assert len(found) == 8
    assert all(t[2] - s[2] == 400 and s[1] == (s[2] // 1000) % 2 for s, t in found)


def test_a_repeating_ring_index_pairs_by_its_occurrence():
    """Payload = ring slot (k mod 3): the j-th use of a slot on each side is the same tile."""
    stages = [tile(k, 0, "load", payload=k % 3) for k in range(9)]
    stages += [tile(k, 1, "math", lag=700, payload=k % 3) for k in range(9)]
    found = pairs(build(stages))
    assert len(found) == 9 and {t[2] - s[2] for s, t in found} == {700}


def test_a_consumer_that_takes_tiles_out_of_order():
    order = [1, 0, 3, 2]
    stages = [tile(k, 0, "load", payload=k) for k in range(4)]
    stages += [("math", 1, 5000 + 1000 * j, 5100 + 1000 * j, k) for j, k in enumerate(order)]
    found = pairs(build(stages))
    assert [(s[2] // 1000, (t[2] - 5000) // 1000) for s, t in found] == [(0, 1), (1, 0), (2, 3), (3, 2)]


def test_counts_that_differ_without_a_payload_draw_nothing_and_are_linted():
    stages = [tile(k, k % 2, "load") for k in range(8)]  # round robin: 4 and 4
    stages += [tile(k, 2, "math", lag=400) for k in range(8)]  # one consumer: 8
    trace = build(stages, ctas=2)
    found = flows.pair(trace, LOAD_MATH)
    assert found.arrows == [], "never a wrong arrow"
    (missed,) = found.undecided
    assert (missed.label, missed.source_counts, missed.target_counts, missed.ctas) == (
        "load -> math",
        (4, 4),
        (8,),
        2,
    )
    (finding,) = [f for f in lint.lint(trace, unpaired=found.undecided) if f.code == "unpaired-edge"]
    assert "DAG edge load -> math: no arrows in 2 CTA(s)" in finding.message
    assert "load: 4, 4; math: 8" in finding.message and "payload" in finding.hint


def test_a_payload_on_one_side_only_falls_back_to_the_order():
    stages = [tile(k, 0, "load", payload=k) for k in range(3)]
    stages += [tile(k, 1, "math", lag=10) for k in range(3)]
    found = pairs(build(stages))
    assert len(found) == 3 and {t[2] - s[2] for s, t in found} == {10}


def test_the_drawn_arrows_are_capped_per_launch_not_the_pairing():
    stages = [tile(k, 0, "load") for k in range(30)] + [tile(k, 1, "math", lag=5) for k in range(30)]
    trace = build(stages)
    assert len(flows.pair(trace, LOAD_MATH).arrows) == 30
    assert len(flows.flows(trace, LOAD_MATH, cap=10)) == 10
    assert isinstance(trace.launches[0].ranges.start, array)


# -- the H200 captures of every shape, against a pairing from what each kernel is known to do


SHAPES = ("1to4", "2to4", "2to1", "slow-reduce", "slower-reduce", "balanced", "slower-load")


def iket_pairing(trace_path: Path) -> set:
    from iket_cli.model import annotations
    from iket_cli.model import trace as trace_mod

    loaded = trace_mod.load(trace_path)
    found = set()
    for f in flows.pair(loaded, annotations.dags_for(trace_path)).arrows:
        r = loaded.launches[f.launch].ranges
        found.add(
            tuple(
                (f.launch, loaded.name(r.name[row]), r.loc[row], r.start[row]) for row in (f.source, f.target)
            )
        )
    return found


def test_every_h200_shape_pairs_as_the_kernel_feeds(pipeline_shapes):
    """Issue 33's done-when on real captures: one producer warp to four consumers, two
    cooperating producers to four and to one, three speeds, and round-robin producers paired
    by payload (the tile's index; a repeating stage index with the tiles taken out of order)."""
    import json

    from conftest import project_module

    recount = project_module("scripts", "pipeline_recount")
    for shape in (*SHAPES, *recount.ROUND_ROBIN):
        (trace_path,) = (pipeline_shapes / shape).glob("iket_pid_*.trace.json")
        doc = json.loads(trace_path.read_text())
        expected, got = recount.for_shape(shape, doc), iket_pairing(trace_path)
        arrows = {"2to4": 2 * 1024, "2to1": 1024 // 2}.get(shape, 1024)  # producer warps x consumer warps
        assert got == expected and len(got) == arrows, (shape, len(got), len(expected))
