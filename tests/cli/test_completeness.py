"""Issue 51: what IKET lost is said where the numbers are, each case replayed through the real
CLI from what the H100 recorded (tests/fixtures/loss_*: run-iket 4.8.1 --keep --log-level info;
docs/gpu/issue51_h100/)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from iket_cli.model import manifest

from conftest import FIXTURES, replay, run_iket

BUDGET_LINE = (
    "INCOMPLETE: 1 launch of profiled_affine_kernel recorded nothing: its warps emitted 4 timestamps, "
    "over the budget of 1 per warp"
)
MULTI_LINE = (
    "INCOMPLETE: 3 launches of scale_loop_kernel recorded nothing: its warps emitted 13 timestamps, "
    "over the budget of 3 per warp"
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "w.py").write_text("def workload():\n    print('workload ran')\n")
    return tmp_path


def profile(double: Path, work: Path, fixture: str, *args: str):
    return run_iket("profile", "--run-iket", double, *args, cwd=work, env=replay(fixture))


def test_a_budget_below_what_the_kernel_emits_is_said_with_the_budget_it_needs(double, work):
    result = profile(double, work, "loss_budget", "-o", "cap", "--max-ts-cnt-per-warp", "1", "w.py:workload")
    assert result.code == 0, result
    assert "the budget of 1 timestamps per warp is below the 8 the tracker pass counted" in result.stderr
    assert BUDGET_LINE in result.stderr
    assert "or pass --max-ts-cnt-per-warp 8" in result.stderr
    assert "1 launch · 0 ranges · 0 marks · INCOMPLETE" in result.stderr, "the summary line says it"
    record = manifest.read(work / "cap")["completeness"]
    (loss,) = record["losses"]
    assert record["complete"] is False and "decode" in record["checked"]
    assert (
        loss["kernel"],
        loss["cause"],
        loss["lost"],
        loss["launches"],
        loss["budget"],
        loss["needed"],
    ) == (
        "profiled_affine_kernel",
        "budget",
        "records",
        1,
        1,
        8,
    )
    assert loss["records"] == 1, "its one warp"


def test_show_keeps_a_kernel_that_lost_everything_with_a_banner(double, work):
    profile(double, work, "loss_multi", "-o", "cap", "--max-ts-cnt-per-warp", "3", "w.py:workload")
    shown = run_iket("show", "cap", cwd=work)
    assert shown.code == 0, shown
    assert shown.stdout.startswith("INCOMPLETE: these numbers miss what IKET lost")
    assert MULTI_LINE.removeprefix("INCOMPLETE: ") in " ".join(shown.stdout.split())
    assert "scale_loop_kernel" in shown.stdout.split("INCOMPLETE: lost")[1], "its row in the table of losses"
    assert "copy_kernel_kernel" in shown.stdout, "the kernel that fit is shown as before"
    assert "[budget-drop]" in shown.stderr and "[empty-launch]" not in shown.stderr
    data = json.loads(run_iket("show", "cap", "--format", "json", cwd=work).stdout)
    assert [loss["short"] for p in data["processes"] for loss in p["losses"]] == ["scale_loop_kernel"]
    csv = run_iket("show", "cap", "--format", "csv", cwd=work).stdout
    assert ",,scale_loop_kernel,scale_loop_kernel,lost,budget,,3," in csv


def test_lint_names_the_loss_and_strict_fails_on_it(double, work):
    profile(double, work, "loss_multi", "-o", "cap", "--max-ts-cnt-per-warp", "3", "w.py:workload")
    lint = run_iket("lint", "cap", cwd=work)
    assert lint.code == 0 and "[budget-drop] " + MULTI_LINE in lint.stdout + lint.stderr, lint
    assert run_iket("lint", "cap", "--strict", cwd=work).code == 1


def test_strict_stops_before_the_capture_pass(double, work):
    result = profile(
        double, work, "loss_multi", "-o", "cap", "--strict", "--max-ts-cnt-per-warp", "3", "w.py:workload"
    )
    assert result.code == 1, result
    assert "stopped before the capture pass (--strict)" in result.stderr
    assert result.stdout.count("workload ran") == 1, "the capture pass was not spent"
    assert manifest.read(work / "cap.failed")["status"] == "failed" and not (work / "cap").exists()


def test_strict_after_a_loss_the_tracker_did_not_foresee_publishes_and_fails(double, work, tmp_path):
    no_tracker_count = tmp_path / "fixture"
    shutil.copytree(FIXTURES / "loss_multi", no_tracker_count)
    for path in no_tracker_count.glob("tracker/pid_*/tracker.json"):
        data = json.loads(path.read_text())
        data["recommended_max_ts_cnt_per_warp"] = 2  # nothing said before the capture pass
        path.write_text(json.dumps(data))
    result = run_iket(
        "profile", "--run-iket", double, "-o", "cap", "--strict", "--max-ts-cnt-per-warp", "3",
        "w.py:workload", cwd=work, env={"IKET_DOUBLE_CAPTURE": str(no_tracker_count)},
    )  # fmt: skip
    assert result.code == 1, result
    assert MULTI_LINE in result.stderr and "its losses in manifest.json" in result.stderr
    assert manifest.read(work / "cap")["completeness"]["complete"] is False, "published"
    as_json = run_iket(
        "profile", "--run-iket", double, "-o", "cap", "--clobber", "--strict", "--json",
        "--max-ts-cnt-per-warp", "3", "w.py:workload", cwd=work,
        env={"IKET_DOUBLE_CAPTURE": str(no_tracker_count)},
    )  # fmt: skip
    assert as_json.code == 1 and json.loads(as_json.stdout)["completeness"]["complete"] is False, as_json


def test_launches_of_a_cuda_graph_are_read_and_counted(double, work):
    result = profile(double, work, "loss_graph", "-o", "cap", "w.py:workload")
    assert result.code == 0 and "INCOMPLETE" not in result.stderr, result
    record = manifest.read(work / "cap")
    assert record["completeness"]["complete"] is True
    assert record["processes"][0]["launches"] == 5, "2 of their own and 3 graph replays"
    shown = run_iket("show", "cap", cwd=work)
    assert "profiled_affine_kernel · 5 launch(es)" in shown.stdout


def test_graph_launches_the_capture_lacks_are_a_loss(double, work, tmp_path):
    lost = tmp_path / "fixture"  # the capture pass without its graph replays, as the issue saw it
    shutil.copytree(FIXTURES / "loss_graph", lost)
    for path in lost.glob("iket/pid_*/iket.data.json"):
        data = json.loads(path.read_text())
        data["graphLaunches"] = {}
        path.write_text(json.dumps(data))
    result = run_iket(
        "profile", "--run-iket", double, "-o", "cap", "w.py:workload", cwd=work,
        env={"IKET_DOUBLE_CAPTURE": str(lost)},
    )  # fmt: skip
    assert result.code == 0, result
    said = "3 graph launches of profiled_affine_kernel not traced (3 in the tracker pass, 0 captured)"
    assert f"INCOMPLETE: {said}" in result.stderr
    lint = run_iket("lint", "cap", cwd=work)
    assert "[graph-launch]" in lint.stdout + lint.stderr


@pytest.mark.parametrize("fixture", ["affine", "multi", "cute_pipeline", "spawn"])
def test_a_whole_capture_raises_no_alarm(double, work, fixture):
    result = profile(double, work, fixture, "-o", "cap", "w.py:workload")
    assert result.code == 0 and "INCOMPLETE" not in result.stderr, result
    record = manifest.read(work / "cap")["completeness"]
    assert record["complete"] is True and record["losses"] == []
    assert "INCOMPLETE" not in run_iket("show", "cap", cwd=work).stdout


def test_the_report_has_a_health_panel(double, work):
    profile(double, work, "loss_budget", "-o", "cap", "--max-ts-cnt-per-warp", "1", "--postprocess", "all",
            "w.py:workload")  # fmt: skip
    page = next((work / "cap").glob("*.html")).read_text()
    assert '"health":{"complete":false' in page and "function healthSection" in page


def test_diff_says_a_side_is_incomplete_and_the_gate_refuses_it(double, work):
    profile(double, work, "multi", "-o", "base", "w.py:workload")
    profile(double, work, "loss_multi", "-o", "new", "--max-ts-cnt-per-warp", "3", "w.py:workload")
    plain = run_iket("diff", "base", "new", cwd=work)
    assert "NEW (new) INCOMPLETE: 3 launches of scale_loop_kernel" in plain.stderr, plain
    gated = run_iket("diff", "base", "new", "--fail-over", "1000%", cwd=work)
    assert gated.code == 1 and "the gate cannot pass: NEW is INCOMPLETE" in gated.stderr, gated


def test_iket_run_calls_an_incomplete_job_incomplete_and_junit_fails_it(double, work):
    loss = FIXTURES / "loss_budget"
    (work / "iket.toml").write_text(
        f'output = "runs"\nrun_iket = "{double}"\n\n'
        f'[[jobs]]\nname = "tight"\ntarget = "w.py:workload"\nmax_ts_cnt_per_warp = 1\n'
        f'env = {{ IKET_DOUBLE_CAPTURE = "{loss}" }}\n'
    )
    result = run_iket("run", "--junit", "junit.xml", cwd=work)
    assert result.code == 1, result
    (job,) = json.loads((work / "runs" / "run-manifest.json").read_text())["jobs"]
    assert job["status"] == "incomplete" and job["error"].startswith(BUDGET_LINE)
    assert 'type="incomplete"' in (work / "junit.xml").read_text()


def test_postprocess_of_a_raw_run_iket_folder_records_its_losses(work):
    folder = work / "raw"
    shutil.copytree(FIXTURES / "loss_multi", folder)
    for path in folder.glob("iket_pid_*"):
        path.unlink()
    result = run_iket("postprocess", "raw", "--format", "json", cwd=work)
    assert result.code == 0, result
    (loss,) = manifest.read(folder)["completeness"]["losses"]
    assert (loss["short"], loss["launches"], loss["needed"]) == ("scale_loop_kernel", 3, 16)


def test_a_damaged_completeness_record_is_one_line_and_names_are_spelled_out(double, work):
    profile(double, work, "loss_multi", "-o", "cap", "--max-ts-cnt-per-warp", "3", "w.py:workload")
    path = work / "cap" / "manifest.json"
    record = json.loads(path.read_text())
    record["completeness"]["losses"][0]["message"] = "evil \x1b[2J name"
    record["completeness"]["losses"][0]["cause"] = "[bold]x"
    path.write_text(json.dumps(record))
    shown = run_iket("show", "cap", cwd=work)
    assert shown.code == 0 and "\x1b" not in shown.stdout + shown.stderr and "\\x1b[2J" in shown.stdout
    assert "[bold]x" in shown.stdout, "markup in a manifest is text"
    record["completeness"]["losses"][0]["launches"] = "three"
    path.write_text(json.dumps(record))
    broken = run_iket("show", "cap", cwd=work)
    assert broken.code == 2 and "completeness.losses[0].launches" in broken.stderr, broken
    assert "Traceback" not in broken.stderr and len(broken.stderr.strip().splitlines()) <= 2


@pytest.mark.parametrize("special", ["fifo", "zero"])
def test_a_raw_data_file_that_is_no_file_neither_hangs_nor_fills_memory(double, work, special):
    """Found by the battery's ``loss`` kind: the warp slots, the raw counts and the injection log
    were read from whatever the raw capture's files were (a FIFO blocked, /dev/zero never ended)."""
    profile(double, work, "loss_multi", "-o", "cap", "--keep", "--max-ts-cnt-per-warp", "3", "w.py:workload")
    raw = next((work / "cap" / "iket").glob("pid_*"))
    for name in ("iket.data.bin", "iket.injection.log"):
        (raw / name).unlink()
        if special == "fifo":
            os.mkfifo(raw / name)
        else:
            (raw / name).symlink_to("/dev/zero")
    lint = run_iket("lint", "cap", cwd=work, timeout=30)
    assert lint.code == 0 and "Traceback" not in lint.stderr, lint
    for path in [work / "cap" / "manifest.json", *(work / "cap").glob("iket_pid_*")]:
        path.unlink()
    decoded = run_iket("postprocess", "cap", "--format", "json", cwd=work, timeout=30)
    assert decoded.code == 1 and "Traceback" not in decoded.stderr, decoded
    assert sum(line.startswith("iket: error:") for line in decoded.stderr.splitlines()) == 1


def test_a_bare_trace_that_lost_its_warps_is_said_by_show_and_lint(work):
    bare = work / "budget1.trace.json"
    shutil.copy(FIXTURES / "session" / "budget1.trace.json", bare)
    shown = run_iket("show", bare.name, cwd=work)
    assert shown.code == 0 and shown.stdout.startswith("INCOMPLETE"), shown
    assert "kernels that recorded no event" in shown.stdout, "not taken for a warp trace: it has no lifetime"
    lint = run_iket("lint", bare.name, cwd=work)
    assert "[budget-drop]" in lint.stdout + lint.stderr, lint


def test_a_merge_keeps_what_its_parts_lost(double, work):
    profile(double, work, "multi", "-o", "whole", "w.py:workload")
    profile(double, work, "loss_multi", "-o", "lossy", "--max-ts-cnt-per-warp", "3", "w.py:workload")
    merged = run_iket("merge", "both", "whole", "lossy", cwd=work)
    assert merged.code == 0, merged
    record = manifest.read(work / "both")["completeness"]
    assert record["complete"] is False and [loss["short"] for loss in record["losses"]] == [
        "scale_loop_kernel"
    ]
    shown = run_iket("show", "both", cwd=work).stdout
    banner = shown.index("INCOMPLETE: these numbers miss")
    assert shown.index("pid whole/") < banner < shown.index("pid lossy/"), "above the part that lost it"
    (work / "whole" / "manifest.json").write_text(
        json.dumps({k: v for k, v in manifest.read(work / "whole").items() if k != "completeness"})
    )
    again = run_iket("merge", "both2", "whole", "lossy", cwd=work)
    assert again.code == 0, again
    record = manifest.read(work / "both2")["completeness"]
    assert record["complete"] is False and "checked" in record
    assert {"source": "merge", "why": "whole keeps no completeness record"} in record["unchecked"]
