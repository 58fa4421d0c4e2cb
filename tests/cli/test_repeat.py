"""``iket profile --repeat N`` through the real CLI: one tracker pass, N capture passes (the
real run-iket, the double replaying H200 captures in each), the repeats published together,
and every reader of a capture reading them: show (pooled, with the spread), lint, report,
merge, diff and the Python API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iket_cli.errors import MultiProcessError
from iket_cli.model import manifest
from iket_cli.model.folder import Capture
from iket_cli.render.report import embedded

from conftest import FIXTURES, replay, run_iket

#: A workload that counts its runs, and fails the run named in FAIL_RUN.
WORKLOAD = (
    "import os, sys\n"
    "def workload():\n"
    "    with open(os.environ['PASSES'], 'a') as f:\n"
    "        f.write('pass\\n')\n"
    "    runs = open(os.environ['PASSES']).read().count('pass')\n"
    "    if str(runs) == os.environ.get('FAIL_RUN'):\n"
    "        sys.exit(f'run {runs} fails on purpose')\n"
    "    print('workload ran')\n"
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "w.py").write_text(WORKLOAD)
    return tmp_path


def capture(double, work: Path, out: str, *args: str, env: dict | None = None):
    full = {
        **replay("affine"),
        "PASSES": str(work / f"{out}.passes"),
        "IKET_CACHE_DIR": str(work / "cache"),
        **(env or {}),
    }
    done = run_iket("profile", "--run-iket", double, "-o", out, *args, "w.py:workload", cwd=work, env=full)
    runs = (work / f"{out}.passes").read_text().count("pass") if (work / f"{out}.passes").exists() else 0
    return done, runs


def test_one_tracker_pass_then_n_capture_passes_each_decoded(work, double):
    done, runs = capture(double, work, "cap", "--repeat", "3", "--tracker", "fresh")
    assert done.code == 0, done
    assert runs == 4, "one tracker pass, three capture passes"
    record = manifest.read(work / "cap")
    assert record["status"] == "ok"
    assert [(r["index"], r["dir"], r["status"]) for r in record["repeats"]] == [
        (1, "", "ok"),
        (2, "repeat-2", "ok"),
        (3, "repeat-3", "ok"),
    ]
    assert all(r["capture_s"] > 0 and r["processes"] == ["0x204"] for r in record["repeats"])
    assert [p["repeat"] for p in record["processes"]] == [1, 2, 3]
    for process in record["processes"]:
        for artifact in process["artifacts"].values():
            assert (work / "cap" / artifact["path"]).is_file(), artifact
    assert record["processes"][2]["artifacts"]["html"]["path"] == "repeat-3/iket_pid_0x204.html"
    assert not (work / "cap" / "repeat-2" / "iket").exists(), "intermediates removed, as at the top"
    assert "repeat 3 of 3" in done.stderr and "3 repeats (capture pass" in done.stderr
    assert sorted(p.name for p in work.iterdir() if p.name.startswith((".", "cap"))) == ["cap", "cap.passes"]


def test_show_pools_the_repeats_and_gives_the_spread(work, double):
    assert capture(double, work, "cap", "--repeat", "3")[0].code == 0
    shown = run_iket("show", "cap", "--format", "json", cwd=work)
    assert shown.code == 0, shown
    (process,) = json.loads(shown.stdout)["processes"]
    assert process["repeats"] == {"pooled": [1, 2, 3], "excluded": []}
    (row,) = process["kernels"][0]["ranges"]
    single = json.loads(run_iket("show", FIXTURES / "affine", "--format", "json", cwd=work).stdout)
    one = single["processes"][0]["kernels"][0]["ranges"][0]["durations"]
    assert row["durations"]["count"] == 3 * one["count"] and row["durations"]["p50"] == one["p50"]
    assert row["spread"] == {"medians": [one["p50"]] * 3, "min": one["p50"], "max": one["p50"], "cv": 0.0}
    table = run_iket("show", "cap", cwd=work)
    assert "3 repeats pooled (1, 2, 3)" in table.stdout and "p50 per repeat" in table.stdout
    by_launch = run_iket("show", "cap", "--by", "launch", cwd=work).stdout
    assert "(repeat 3) · launch 0" in by_launch, "launch N is one repeat's launch: listed apart"
    csv = run_iket("show", "cap", "--format", "csv", cwd=work).stdout.splitlines()
    assert csv[0].endswith("repeats,repeat_p50_min_ns,repeat_p50_max_ns,repeat_p50_cv")
    assert csv[1].endswith(f",3,{one['p50']},{one['p50']},0.0")


def test_a_failed_repeat_keeps_the_others(work, double):
    done, runs = capture(double, work, "cap", "--repeat", "3", "--tracker", "fresh", env={"FAIL_RUN": "3"})
    assert done.code == 0, done
    assert runs == 4 and "warning: repeat 2 failed" in done.stderr and "Traceback" not in done.stderr
    record = manifest.read(work / "cap")
    assert record["status"] == "partial"
    assert [r["status"] for r in record["repeats"]] == ["ok", "failed", "ok"]
    assert "run 3 fails on purpose" in (work / "cap" / "iket.log").read_text()
    assert [p["repeat"] for p in record["processes"]] == [1, 3]
    assert not (work / "cap" / "repeat-2").exists()
    shown = json.loads(run_iket("show", "cap", "--format", "json", cwd=work).stdout)
    assert shown["processes"][0]["repeats"]["pooled"] == [1, 3]
    assert "repeat 2 (failed:" in shown["processes"][0]["repeats"]["excluded"][0]
    strict, _ = capture(
        double, work, "cap2", "--repeat", "3", "--tracker", "fresh", "--strict", env={"FAIL_RUN": "3"}
    )
    assert strict.code == 1 and "1 of 3 repeats failed" in strict.stderr, strict
    assert manifest.read(work / "cap2")["status"] == "partial", "published all the same"


def test_a_repeat_that_does_not_fit_the_tracker_pass_is_left_out(work, double):
    queue = work / "queue"
    queue.write_text(f"{FIXTURES / 'affine'}\n{FIXTURES / 'affine'}\n{FIXTURES / 'multi'}\n")
    done, _ = capture(
        double, work, "cap", "--repeat", "3", "--tracker", "fresh", env={"IKET_DOUBLE_QUEUE": str(queue)}
    )
    assert done.code == 0, done
    assert "repeat 3 does not fit the tracker pass" in done.stderr
    record = manifest.read(work / "cap")
    assert [r["status"] for r in record["repeats"]] == ["ok", "ok", "drifted"]
    assert record["status"] == "ok"
    shown = run_iket("show", "cap", cwd=work)
    assert "2 repeats pooled (1, 2); left out: repeat 3 (drifted:" in shown.stdout


def test_the_warm_standby_serves_every_repeat(work, double):
    (work / "w.py").write_text("import numpy\n" + WORKLOAD)
    done, _ = capture(double, work, "cap", "--repeat", "3", "--tracker", "fresh")
    assert done.code == 0, done
    for name in ("warm.log", "warm-r2.log", "warm-r3.log"):
        assert "iket-warm: serving the pass" in (work / "cap" / name).read_text(), name


def test_a_cached_tracker_pass_serves_all_repeats(work, double):
    assert capture(double, work, "cap1")[0].code == 0
    done, runs = capture(double, work, "cap2", "--repeat", "2")
    assert done.code == 0 and runs == 2, done
    assert manifest.read(work / "cap2")["tracker"]["mode"] == "reused"


def test_readers_of_a_repeated_capture(work, double, tmp_path):
    assert capture(double, work, "cap", "--repeat", "2")[0].code == 0
    lint = run_iket("lint", "cap", cwd=work)
    assert lint.code == 0 and "Traceback" not in lint.stderr, lint
    report = run_iket("report", "cap", "-o", "r.html", cwd=work)
    assert report.code == 0 and (work / "r.html").stat().st_size > 10_000, report
    (stats,) = embedded(work / "r.html")["stats"]
    assert stats["repeats"]["pooled"] == [1, 2] and stats["kernels"][0]["ranges"][0]["spread"]["cv"] == 0.0
    assert capture(double, work, "one")[0].code == 0
    merged = run_iket("merge", "m", "cap", "one", "--timeline", cwd=work)
    assert merged.code == 0, merged
    paths = [p["artifacts"]["trace_json"]["path"] for p in manifest.read(work / "m")["processes"]]
    assert paths[:2] == ["cap/iket_pid_0x204.trace.json", "cap/repeat-2/iket_pid_0x204.trace.json"]
    assert all((work / "m" / path).is_file() for path in paths)
    assert run_iket("show", "m", cwd=work).code == 0
    sql = run_iket(
        "sql",
        "cap",
        "SELECT repeat, count(*) AS n FROM processes GROUP BY ALL ORDER BY 1",
        "--format",
        "csv",
        cwd=work,
    )
    assert sql.code == 0 and sql.stdout.splitlines() == ["repeat,n", "1,1", "2,1"], sql
    captured = Capture.load(work / "cap")
    assert [view.manifest["repeat"]["index"] for view in captured.repeats] == [1, 2]
    assert captured.repeats[1].trace_json == work / "cap" / "repeat-2" / "iket_pid_0x204.trace.json"
    with pytest.raises(MultiProcessError, match="2 repeats"):
        _ = captured.trace_json


def test_repeat_in_a_job_and_bad_values(work, double):
    (work / "iket.toml").write_text(
        f'run_iket = "{double}"\ntracker = "fresh"\n'
        '[[jobs]]\nname = "w"\ntarget = "w.py:workload"\nrepeat = 2\n'
    )
    env = {**replay("affine"), "PASSES": str(work / "p"), "IKET_CACHE_DIR": str(work / "c")}
    done = run_iket("run", cwd=work, env=env)
    assert done.code == 0, done
    assert len(manifest.read(work / "iket-runs" / "w")["repeats"]) == 2
    (work / "iket.toml").write_text('[[jobs]]\nname = "w"\ntarget = "w.py:workload"\nrepeat = 0\n')
    bad = run_iket("run", cwd=work, env=env)
    assert bad.code == 2 and "jobs[0].repeat: should be 1 or more, not 0" in bad.stderr, bad
    flag = run_iket("profile", "--repeat", "0", "w.py:workload", cwd=work, env=env)
    assert flag.code == 2 and "Traceback" not in flag.stderr


def test_warp_trace_repeats_each_run_alone(work, double):
    """--warp-trace has no tracker pass: each repeat is a warp-trace run of its own; show
    pools the launches, and diff judges the launch spans by the repeats."""
    env = {"IKET_DOUBLE_WARP_CAPTURE": str(FIXTURES / "warp_multi")}
    for out in ("w1", "w2"):
        done, runs = capture(double, work, out, "--warp-trace", "--repeat", "3", env=env)
        assert done.code == 0 and runs == 3, done
    record = manifest.read(work / "w1")
    assert record["tracker"]["mode"] == "none" and [r["status"] for r in record["repeats"]] == ["ok"] * 3
    shown = run_iket("show", "w1", cwd=work)
    assert "3 repeats pooled (1, 2, 3)" in shown.stdout and "81 launch(es)" in shown.stdout
    diffed = run_iket("diff", "w1", "w2", "--fail-over", "5%", "--format", "json", cwd=work)
    assert diffed.code == 0, diffed
    spans = [c for c in json.loads(diffed.stdout)["changes"] if c["range"] == "launch span"]
    assert spans and all(c["repeats"] == [3, 3] for c in spans)


def test_a_partial_job_is_still_gated(work, double):
    """iket run --baseline gates a job whose repeats partly failed on the repeats it has."""
    config = f'run_iket = "{double}"\ntracker = "fresh"\nrepeat = 3\n'
    config += '[[jobs]]\nname = "w"\ntarget = "w.py:workload"\n'
    (work / "iket.toml").write_text(config)
    env = {**replay("affine"), "IKET_CACHE_DIR": str(work / "c")}
    assert run_iket("run", "--output", "base", cwd=work, env={**env, "PASSES": str(work / "p1")}).code == 0
    for trace in (work / "base" / "w").rglob("*.trace.json"):  # the baseline made much faster
        data = json.loads(trace.read_text())
        (only,) = data["launches"][0]["ranges"]
        only["endTs"] = only["startTs"] + 32
        trace.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")))
    new = {**env, "PASSES": str(work / "p2"), "FAIL_RUN": "3"}  # repeat 2 of the new run fails
    gated = run_iket("run", "--output", "new", "--baseline", "base", "--fail-over", "5%", cwd=work, env=new)
    assert manifest.read(work / "new" / "w")["status"] == "partial"
    assert gated.code == 1 and "not enough repeats to decide" in gated.stderr, gated
