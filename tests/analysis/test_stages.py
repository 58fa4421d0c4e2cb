"""What bounds a pipelined kernel (issue 33, item 2), against independent recounts.

A simulated two-stage pipeline (a producer warp, a consumer warp that waits in a ``wait``
range for each tile) names the slow stage as the bound, and the bound follows when the
other stage is made 2x slower than it. On the real H200 capture of examples/cute_pipeline.py
every figure of ``iket show --pipeline`` is recounted here from the trace JSON.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from iket_cli.analysis import stages
from iket_cli.model.annotations import Dag, Edge
from iket_cli.model.trace import Columns, Launch, Trace

from conftest import FIXTURES, run_iket

DAG = [Dag("pipe", [Edge("load", "math")])]


def simulate(load_ns: int, math_ns: int, tiles: int = 40, ctas: int = 2) -> Trace:
    """Producer on warp 0 loads back to back (an unbounded ring); the consumer on warp 1
    waits (a ``wait`` range) until tile k is loaded and its previous math is done."""
    names = ["load", "math", "wait"]
    cols, warps = Columns(), Columns()
    for cta in range(ctas):
        base = cta * 10**7
        free = base
        for k in range(tiles):
            ready = base + (k + 1) * load_ns
            cols_add(cols, 0, cta * 2, ready - load_ns, ready)
            start = max(ready, free) + 20
            if start - 20 > free:
                cols_add(cols, 2, cta * 2 + 1, free, start - 20)
            cols_add(cols, 1, cta * 2 + 1, start, start + math_ns)
            free = start + math_ns
        end = max(free, base + tiles * load_ns) + 50
        for loc in (cta * 2, cta * 2 + 1):
            warps.loc.append(loc), warps.start.append(base), warps.end.append(end), warps.name.append(0)
    locations = [
        {"ctaId": [cta, 0, 0], "gpcId": 0, "smId": 0, "tpcId": 0, "warpId": w}
        for cta in range(ctas)
        for w in (0, 1)
    ]
    return Trace(
        Path("sim.trace.json"),
        [Launch("k", (ctas, 1, 1), (64, 1, 1), 1, ranges=cols, warps=warps)],
        names,
        locations,
    )


def cols_add(cols: Columns, name: int, loc: int, start: int, end: int) -> None:
    (
        cols.name.append(name),
        cols.loc.append(loc),
        cols.start.append(start),
        cols.end.append(end),
        cols.kind.append(1),
    )


def by_name(pipe) -> dict:
    return {s.name: s for s in pipe.stages}


def test_a_slow_producer_is_named_and_the_bound_follows_a_slower_consumer():
    (slow_load,) = stages.pipelines(simulate(load_ns=1000, math_ns=300), DAG, None)
    found = by_name(slow_load)
    assert slow_load.bound == "load" and slow_load.consumer == "math"
    assert found["load"].busy > 0.95 and found["load"].period_ns == 1000
    assert found["math"].starved_ns == pytest.approx(700 - 20, abs=1), "free 680 ns before each tile"
    assert found["math"].period_ns == 1000, "a coupled pipeline: the bound's period everywhere"
    assert "bound by `load`" in slow_load.sentence and "`math` waits a median 680 ns" in slow_load.sentence
    assert "from 1.00 µs to about 300 ns" in slow_load.sentence
    (slow_math,) = stages.pipelines(simulate(load_ns=1000, math_ns=2000), DAG, None)
    found = by_name(slow_math)
    assert slow_math.bound == "math", slow_math.sentence
    assert found["math"].period_ns == 2020 and found["math"].starved_ns == 0
    assert found["load"].slack_ns > 1000, "load's output waits for the busy consumer"
    assert "`load`'s output waits a median" in slow_math.sentence


def test_fill_and_drain():
    (pipe,) = stages.pipelines(simulate(load_ns=1000, math_ns=300, tiles=5, ctas=1), DAG, None)
    assert pipe.fill_ns == 1000 + 20, "the first math starts once the first tile is loaded"
    assert pipe.drain_ns == (5000 + 20 + 300 + 50) - 5000


def test_no_stages_and_no_roles_means_no_pipeline():
    assert stages.pipelines(simulate(1000, 300), [], None) == []


# -- the H200 capture of examples/cute_pipeline.py, recounted from its JSON -----------------

PIPE = FIXTURES / "cute_pipeline"


def recount() -> dict:
    doc = json.loads((PIPE / "iket_pid_0xfc5.trace.json").read_text())
    (launch,) = doc["launches"]
    where = doc["locationTable"]
    per_warp: dict = defaultdict(lambda: defaultdict(list))
    for r in launch["ranges"]:
        loc = r["warpLocIdxs"][0]
        per_warp[loc][doc["stringTable"][r["rangeNameIdx"]]].append((r["startTs"], r["endTs"]))
    life = {w["locIdx"]: (w["startTs"], w["endTs"]) for w in launch["warpLifetimes"]}
    out = {}
    for name in ("load", "reduce"):
        warps = [loc for loc in per_warp if per_warp[loc][name]]
        spans = [e - s for loc in warps for s, e in per_warp[loc][name]]
        waits = [e - s for loc in warps for s, e in per_warp[loc]["wait"]]
        lifetime = sum(life[loc][1] - life[loc][0] for loc in warps)
        gaps = [
            b[0] - a[0]
            for loc in warps
            for a, b in zip(sorted(per_warp[loc][name]), sorted(per_warp[loc][name])[1:], strict=False)
        ]
        out[name] = {
            "instances": len(spans),
            "warps": len(warps),
            "busy": sum(spans) / lifetime,
            "waiting": sum(waits) / lifetime,
            "period": statistics.median(gaps),
        }
    starved = []  # k-th load of a CTA feeds the k-th reduce of each consumer warp (equal counts)
    for loc, names in per_warp.items():
        if not names["reduce"]:
            continue
        cta = where[loc]["ctaId"]
        (producer,) = [p for p in per_warp if where[p]["ctaId"] == cta and per_warp[p]["load"]]
        loads, reduces = sorted(per_warp[producer]["load"]), sorted(names["reduce"])
        previous = life[loc][0]
        for (_, load_end), (start, end) in zip(loads, reduces, strict=True):
            starved.append(max(0, min(load_end, start) - previous))
            previous = end
    out["reduce"]["starved"] = statistics.median(starved)
    return out


def test_show_pipeline_on_the_h200_capture_equals_a_recount(tmp_path):
    expected = recount()
    shown = run_iket("show", PIPE, "--pipeline", "--format", "json", cwd=tmp_path)
    assert shown.code == 0, shown
    (process,) = json.loads(shown.stdout)["processes"]
    (kernel,) = process["kernels"]
    got = {s["name"]: s for s in kernel["stages"]}
    for name, figures in expected.items():
        stage = got[name]
        assert (stage["instances"], stage["warps"]) == (figures["instances"], figures["warps"])
        assert stage["busy"] == pytest.approx(figures["busy"], rel=1e-9), name
        assert stage["waiting"] == pytest.approx(figures["waiting"], rel=1e-9), name
        assert stage["period_ns"] == figures["period"], name
    assert got["reduce"]["starved_ns"] == expected["reduce"]["starved"]
    assert kernel["bound"] == "load" and got["load"]["role"] == "Producer"
    table = run_iket("show", PIPE, "--pipeline", cwd=tmp_path)
    assert "bound by `load` on Producer" in table.stdout
    csv = run_iket("show", PIPE, "--pipeline", "--format", "csv", cwd=tmp_path)
    assert csv.stdout.splitlines()[0].startswith("process,kernel,stage,role,instances")
    assert len(csv.stdout.splitlines()) == 3


def test_show_pipeline_without_stages_is_one_line(tmp_path):
    result = run_iket("show", FIXTURES / "affine", "--pipeline", cwd=tmp_path)
    assert result.code == 2 and "has no DAG" in result.stderr and "Traceback" not in result.stderr


def test_diff_gates_stage_periods_and_says_when_the_bound_moved(tmp_path):
    """Issue 33, item 3: ``iket diff`` compares each stage's period like a range, and says
    (on stderr, not as a failure) that the bound moved when another stage became the slow one."""
    from conftest import project_module

    bench = project_module("bench", "bench_show_pipeline")
    for name, reduce_ns in (("base", 180), ("new", 2000)):
        (tmp_path / name).mkdir()
        bench.write(tmp_path / name, 4, 64, reduce_ns=reduce_ns)
    same = run_iket("diff", tmp_path / "base", tmp_path / "base", "--fail-over", "5%", cwd=tmp_path)
    assert same.code == 0 and "load (period)" in same.stdout and "moved" not in same.stderr, same
    moved = run_iket(
        "diff", tmp_path / "base", tmp_path / "new", "--fail-over", "5%", "--format", "json", cwd=tmp_path
    )
    assert moved.code == 1, moved
    assert "the bound moved from `load` to `reduce`" in moved.stderr
    rows = {r["range"]: r for r in json.loads(moved.stdout)["changes"]}
    assert rows["reduce (period)"]["base"] == 1000 and rows["reduce (period)"]["new"] == 2020
    assert rows["reduce (period)"]["regression"]
