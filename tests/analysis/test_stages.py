"""What bounds a pipelined kernel (issue 33, item 2), against independent recounts.

A simulated two-stage pipeline (a producer warp, a consumer warp that waits in a ``wait``
range for each tile) names the slow stage as the bound, and the bound follows when the
other stage is made 2x slower than it. On the real H200 captures of examples/cute_pipeline.py
and examples/cute_round_robin.py in every shape, every figure of ``iket show --pipeline`` is
recounted from the trace JSON (scripts/pipeline_recount.py), and the report, SQL and ``iket
diff`` say the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iket_cli.analysis import stages
from iket_cli.model.trace import Columns, Launch, Trace

from conftest import FIXTURES, LOAD_MATH, run_iket


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
    (slow_load,) = stages.pipelines(simulate(load_ns=1000, math_ns=300), LOAD_MATH, None)
    found = by_name(slow_load)
    assert slow_load.bound == "load" and slow_load.consumer == "math"
    assert found["load"].busy > 0.95 and found["load"].period_ns == 1000
    assert found["math"].starved_ns == pytest.approx(700 - 20, abs=1), "free 680 ns before each tile"
    assert found["math"].period_ns == 1000, "a coupled pipeline: the bound's period everywhere"
    assert "bound by `load`" in slow_load.sentence and "`math` waits a median 680 ns" in slow_load.sentence
    assert "from 1.00 µs to about 300 ns" in slow_load.sentence
    (slow_math,) = stages.pipelines(simulate(load_ns=1000, math_ns=2000), LOAD_MATH, None)
    found = by_name(slow_math)
    assert slow_math.bound == "math", slow_math.sentence
    assert found["math"].period_ns == 2020 and found["math"].starved_ns == 0
    assert found["load"].slack_ns > 1000, "load's output waits for the busy consumer"
    assert "`load`'s output waits a median" in slow_math.sentence


def test_a_balanced_pipeline_names_its_busiest_stage_as_such():
    """Nothing waits either way (the consumer finishes each tile as the next one lands): no
    stage is waited for, every stage keeps pace, and the sentence says so."""
    (even,) = stages.pipelines(simulate(load_ns=1000, math_ns=980), LOAD_MATH, None)
    found = by_name(even)
    assert found["math"].starved_ns == 0 and found["load"].slack_ns == 0
    assert even.bound == "load" and even.consumer is None, even.sentence
    assert even.sentence.startswith("balanced: no stage waits for another"), even.sentence
    assert f"(`math` {found['math'].busy:.0%})" in even.sentence
    assert "from 1.00 µs to about 980 ns" in even.sentence
    (nearly,) = stages.pipelines(simulate(load_ns=1000, math_ns=1050), LOAD_MATH, None)
    assert nearly.bound == "math" and "from 1.07 µs to about 1.00 µs, only 7% less" in nearly.sentence
    assert nearly.sentence.endswith("the stages are nearly balanced, all must get faster"), nearly.sentence


def test_fill_and_drain():
    (pipe,) = stages.pipelines(simulate(load_ns=1000, math_ns=300, tiles=5, ctas=1), LOAD_MATH, None)
    assert pipe.fill_ns == 1000 + 20, "the first math starts once the first tile is loaded"
    assert pipe.drain_ns == (5000 + 20 + 300 + 50) - 5000


def test_no_stages_and_no_roles_means_no_pipeline():
    assert stages.pipelines(simulate(1000, 300), [], None) == []


# -- the H200 captures, recounted from their JSON (scripts/pipeline_recount.py) -------------

PIPE = FIXTURES / "cute_pipeline"
#: The H200 shapes (tests/fixtures/pipeline_shapes.tar.xz) and the stage that bounds each;
#: ``balanced`` keeps both stages busy, so either may be named, with the word "balanced".
BOUNDS = {
    "1to4": "load",
    "2to4": "load",
    "2to1": "load",
    "slow-reduce": "reduce",
    "slower-reduce": "reduce",
    "balanced": None,
    "slower-load": "load",
    "rr-tile": "load",
    "rr-stage-swap": "load",
}


def recount():
    from conftest import project_module

    return project_module("scripts", "pipeline_recount")


def folder_of(pipeline_shapes: Path, shape: str | None) -> Path:
    return PIPE if shape is None else pipeline_shapes / shape


def shown_pipeline(folder: Path, tmp_path: Path) -> dict:
    shown = run_iket("show", folder, "--pipeline", "--format", "json", cwd=tmp_path)
    assert shown.code == 0, shown
    (kernel,) = json.loads(shown.stdout)["processes"][0]["kernels"]
    return kernel


@pytest.mark.parametrize("shape", [None, *BOUNDS])
def test_show_pipeline_on_the_h200_captures_equals_a_recount(pipeline_shapes, tmp_path, shape):
    """Every figure of every stage, on every shape (None: the first capture of cute_pipeline.py)."""
    folder = folder_of(pipeline_shapes, shape)
    (trace_path,) = folder.glob("iket_pid_*.trace.json")
    doc = recount().load(trace_path)
    counted = recount().stages(doc, ["load", "reduce"], recount().for_shape(shape or "1to4", doc))
    kernel = shown_pipeline(folder, tmp_path)
    for stage in kernel["stages"]:
        for mine, theirs in recount().SHOWN.items():
            want = counted[stage["name"]][mine]
            assert stage[theirs] == (want if want is None else pytest.approx(want, rel=1e-9)), (shape, mine)
    bound = BOUNDS.get(shape, "load")
    assert kernel["bound"] == bound if bound else "balanced" in kernel["sentence"], kernel["sentence"]
    roles = {s["name"]: s["role"] for s in kernel["stages"]}
    assert roles == {"load": "Producer", "reduce": "Consumer"}


def test_show_pipeline_table_and_csv(tmp_path):
    table = run_iket("show", PIPE, "--pipeline", cwd=tmp_path)
    assert "bound by `load` on Producer" in table.stdout
    csv = run_iket("show", PIPE, "--pipeline", "--format", "csv", cwd=tmp_path)
    assert csv.stdout.splitlines()[0].startswith("process,kernel,stage,role,instances")
    assert len(csv.stdout.splitlines()) == 3


def test_the_period_and_the_bound_follow_the_slower_stage_on_the_h200(pipeline_shapes, tmp_path):
    """Issue 33's done-when: ``reduce`` made slow is named bound and the period is its work per
    tile; made slower still, the period follows it; ``load`` made about twice as slow as
    ``reduce``, the bound moves to ``load`` and the period follows it."""
    shapes = ("slow-reduce", "slower-reduce", "slower-load")
    pipes = {s: shown_pipeline(pipeline_shapes / s, tmp_path) for s in shapes}
    stage = {s: {row["name"]: row for row in pipe["stages"]} for s, pipe in pipes.items()}
    for shape, bound in (("slow-reduce", "reduce"), ("slower-reduce", "reduce"), ("slower-load", "load")):
        assert pipes[shape]["bound"] == bound, pipes[shape]["sentence"]
        assert stage[shape][bound]["period_ns"] == pytest.approx(stage[shape][bound]["work_ns"], rel=0.1)
    assert stage["slower-reduce"]["reduce"]["period_ns"] > 2 * stage["slow-reduce"]["reduce"]["period_ns"]
    assert stage["slower-load"]["load"]["work_ns"] > 1.6 * stage["slow-reduce"]["reduce"]["work_ns"]


@pytest.mark.parametrize(("base", "new"), [("1to4", "slow-reduce"), ("rr-stage-swap", "rr-tile")])
def test_show_sql_report_and_diff_agree_on_the_h200(pipeline_shapes, tmp_path, base, new):
    """Issue 33's done-when: ``show --pipeline``, the report's panel, SQL's ``stages`` and
    ``flows`` and ``iket diff``'s period rows say the same of one capture."""
    from iket_cli.render import report

    folder = pipeline_shapes / new
    kernel = shown_pipeline(folder, tmp_path)
    written = run_iket("report", folder, "-o", tmp_path / "r.html", cwd=tmp_path)
    assert written.code == 0, written
    (panel,) = report.embedded(tmp_path / "r.html")["pipeline"]
    assert panel["sentence"] == kernel["sentence"] and panel["stages"] == kernel["stages"]
    staged = run_iket("sql", folder, "SELECT * FROM stages", "--format", "json", cwd=tmp_path)
    rows = {r["stage"]: r for r in json.loads(staged.stdout)["rows"]}
    for stage in kernel["stages"]:
        row = rows[stage["name"]]
        assert all(row[k] == stage[k] for k in stages.STAGE_COLUMNS if k != "stage"), stage["name"]
        assert row["bound"] == (stage["name"] == kernel["bound"])
    query = "SELECT count(*) AS n, min(lag_ns) AS low FROM flows"
    counted = run_iket("sql", folder, query, "--format", "json", cwd=tmp_path)
    (row,) = json.loads(counted.stdout)["rows"]
    (trace_path,) = folder.glob("iket_pid_*.trace.json")
    assert row["n"] == len(recount().for_shape(new, recount().load(trace_path))) and row["low"] >= 0
    diffed = run_iket("diff", pipeline_shapes / base, folder, "--format", "json", cwd=tmp_path)
    changes = {c["range"]: c for c in json.loads(diffed.stdout)["changes"]}
    before = shown_pipeline(pipeline_shapes / base, tmp_path)
    for side, pipe in (("base", before), ("new", kernel)):
        for stage in pipe["stages"]:
            assert changes[f"{stage['name']} (period)"][side] == stage["period_ns"], (side, stage["name"])
    moved = before["bound"] != kernel["bound"]
    assert ("the bound moved" in diffed.stderr) == moved and moved == (new == "slow-reduce"), diffed.stderr


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


def test_a_warp_lives_its_lifetime_or_else_the_span_of_its_own_ranges():
    """Warp 0 of each CTA has its lifetime in the trace, warp 1 none: warp 1's span is
    then the first start to the last end of its ranges."""
    trace = simulate(100, 50, tiles=5)
    launch = trace.launches[0]
    rows = list(zip(launch.warps.loc, launch.warps.start, launch.warps.end, strict=True))
    lifetimes = {loc: (start, end) for loc, start, end in rows}
    kept = Columns()
    for loc, start, end in rows:
        if loc % 2 == 0:
            kept.loc.append(loc), kept.start.append(start), kept.end.append(end), kept.name.append(0)
    trace.launches[0] = Launch("k", (2, 1, 1), (64, 1, 1), 1, ranges=launch.ranges, warps=kept)
    table = stages._Table(trace, [0])
    ranges = launch.ranges
    for loc in range(4):
        if loc % 2 == 0:
            expected = lifetimes[loc]
        else:
            own = [k for k, at in enumerate(ranges.loc) if at == loc]
            expected = (min(ranges.start[k] for k in own), max(ranges.end[k] for k in own))
        (born,) = table.born_of([loc]).tolist()
        assert (born, int(table.died[list(table.keys).index(loc)])) == expected, loc
