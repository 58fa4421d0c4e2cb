"""Reading captures that are broken, partial or not what was asked: show, diff, report, lint,
postprocess. Each ends in one line and a documented exit code, never a traceback."""

from __future__ import annotations

import json
import shutil
import tarfile

import pytest

from iket_cli.model import manifest

from conftest import FIXTURES, kept

AFFINE = FIXTURES / "affine" / "iket_pid_0x204.trace.json"


def mutated(path, change) -> None:
    data = json.loads(AFFINE.read_text())
    change(data)
    path.write_text(json.dumps(data))


def backwards(data):
    rng = data["launches"][0]["ranges"][0]
    rng["endTs"] = rng["startTs"] - 1_000_000_000


def bad_location(data):
    data["locationTable"][0] = "sm 3"


BAD_TRACES = [
    ("array", "[]", "is a JSON array, not an object"),
    ("null", "null", "is a JSON null, not an object"),
    ("string", '"x"', "is a JSON string, not an object"),
    ("empty object", "{}", "has schema version None"),
    ("not json", "{", "is not an IKET trace"),
    ("empty file", "", "is empty"),
]
COMMANDS = [["show"], ["lint"], ["report", "-o", "r.html"], ["diff", AFFINE]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(("text", "message"), [b[1:] for b in BAD_TRACES], ids=[b[0] for b in BAD_TRACES])
def test_a_file_that_is_no_trace(harness, command, text, message):
    (harness.work / "bad.trace.json").write_text(text)
    result = harness.run(command[0], "bad.trace.json", *command[1:])
    harness.check(result, 2, message)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("change", "message"),
    [(backwards, "ends before it starts"), (bad_location, "locationTable[0] is not a warp location")],
    ids=["range ends before it starts", "bad location"],
)
def test_a_trace_with_impossible_records(harness, command, change, message):
    mutated(harness.work / "bad.trace.json", change)
    result = harness.run(command[0], "bad.trace.json", *command[1:])
    harness.check(result, 2, message)


def test_show_of_a_filter_that_matches_nothing(harness):
    result = harness.run("show", "cap", "--kernel", "nomatch")
    harness.check(result, 2, "matches --kernel nomatch")
    assert "its kernels: profiled_affine_kernel" in result.stderr
    assert result.stdout == "", "no legend without a table"


def test_show_of_a_capture_whose_decode_failed(harness):
    folder = kept(harness.work, "spawn")
    (folder / "iket" / "pid_0x2b5" / "iket.data.bin").unlink()
    failed = harness.run("postprocess", folder, "--format", "json")
    harness.check(failed, 1, "1 of 2 decodes failed", folder=folder)
    shown = harness.run("show", folder)
    harness.check(shown, 1, "this capture's status is failed", folder=folder)
    assert "profiled_affine_kernel" in shown.stdout, "what was decoded is still shown"


def test_a_capture_without_json_traces(harness):
    result = harness.run("show", FIXTURES / "warp_multi" / "nothing-here")
    harness.check(result, 2, "does not exist")
    shutil.copytree(harness.work / "cap", harness.work / "nojson")
    for path in (harness.work / "nojson").glob("*.trace.json"):
        path.unlink()
    record = manifest.read(harness.work / "nojson")
    for process in record["processes"]:
        process["artifacts"].pop("trace_json", None)
    manifest.write(harness.work / "nojson", record)
    result = harness.run("show", "nojson")
    harness.check(result, 2, "holds no JSON trace")


def renamed(data):
    data["stringTable"] = ["renamed" if s == "affine" else s for s in data["stringTable"]]


def slower(data):
    for launch in data["launches"]:
        for rng in launch["ranges"]:
            rng["endTs"] += 1000


def test_the_diff_gate_fails_when_it_cannot_compare(harness):
    """A renamed range once disabled the gate (every range added or removed: exit 0)."""
    mutated(harness.work / "new.trace.json", renamed)
    result = harness.run("diff", AFFINE, "new.trace.json", "--fail-over", "5%")
    harness.check(result, 1, "have no match in NEW, so --fail-over cannot judge them")
    assert "profiled_affine_kernel / affine" in result.stderr
    ungated = harness.run("diff", AFFINE, "new.trace.json")
    harness.check(ungated, 0)


def test_the_diff_gate_fails_on_a_slowdown(harness):
    mutated(harness.work / "new.trace.json", slower)
    result = harness.run("diff", AFFINE, "new.trace.json", "--fail-over", "5%")
    harness.check(result, 1, "got slower than --fail-over 5% allows")


def test_lint_strict_fails_on_a_finding(harness):
    result = harness.run("lint", FIXTURES / "multi" / "iket_pid_0x23f.trace.json", "--strict")
    harness.check(result, 1, "instrumentation finding(s)")


def test_report_into_a_missing_folder(harness):
    result = harness.run("report", "cap", "-o", "missing/r.html")
    harness.check(result, 2, "is not a directory")


def test_report_names_a_small_size_truly(harness):
    result = harness.run("report", "cap", "-o", "r.html")
    harness.check(result, 0)
    assert "(0.0 MB)" not in result.stderr and "KiB)" in result.stderr


def test_two_decodes_of_one_folder_at_once(harness):
    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(harness.work, filter="data")
    folder = harness.work / "keep256"
    first = harness.start("postprocess", folder, "--format", "perfetto")
    first.wait_for("decoding")
    second = harness.run("postprocess", folder, "--format", "perfetto")
    harness.check(second, 2, "another iket command is using", others_running=True)
    done = first.finish(seconds=300)
    harness.check(done, 0, folder=folder)
    assert (folder / "iket_pid_0x238.pftrace").stat().st_size > 10_000_000


def test_a_manifest_made_by_postprocess_names_no_missing_log(harness):
    folder = kept(harness.work, "affine")
    result = harness.run("postprocess", folder, "--format", "json")
    harness.check(result, 0, folder=folder)
    record = manifest.read(folder)
    assert record["log"] is None and not (folder / "iket.log").exists()


def no_grid_id(data):
    data["launches"][0]["gridId"] = "\udcff"


@pytest.mark.parametrize(
    "command", [*COMMANDS, ["export", "-o", "tables", "--format", "csv"]], ids=lambda c: c[0]
)
def test_a_launch_whose_grid_id_is_not_a_number(harness, command):
    """Issue 50's battery (seed 1199): a gridId that is text reached pyarrow (a traceback)."""
    mutated(harness.work / "bad.trace.json", no_grid_id)
    result = harness.run(command[0], "bad.trace.json", *command[1:])
    harness.check(result, 2, "launch 0 has no gridId")


def test_what_the_fourth_fuzz_battery_found_is_said_in_one_line(tmp_path):
    """A grid id past int64 (``export``), a lone surrogate in a session trace (``postprocess``),
    a raw manifest that is a FIFO (``postprocess``): each ended in a traceback or the time limit."""
    import os

    from conftest import run_iket

    huge = tmp_path / "huge"
    huge.mkdir()
    text = (FIXTURES / "affine" / "iket_pid_0x204.trace.json").read_text()
    (huge / "iket_pid_0x204.trace.json").write_text(text.replace('"gridId":', f'"gridId":{2**80},"x":', 1))
    done = run_iket("export", huge, "-o", tmp_path / "out", "--format", "csv", cwd=tmp_path)
    assert done.code == 2 and "is out of range" in done.stderr and "Traceback" not in done.stderr, done
    surrogate = tmp_path / "surrogate"
    surrogate.mkdir()
    session = json.loads((FIXTURES / "session" / "plain.trace.json").read_text())
    session["stringTable"][0] = "aff\udcffine"
    (surrogate / "iket_pid_0x1.trace.json").write_text(json.dumps(session, indent=1))
    done = run_iket("postprocess", surrogate, "--format", "all", cwd=tmp_path)
    assert done.code == 0 and "Traceback" not in done.stderr, done
    fifo = kept(tmp_path, "affine")
    raw = next((fifo / "iket").glob("pid_*")) / "iket.data.json"
    raw.unlink()
    os.mkfifo(raw)
    done = run_iket("postprocess", fifo, "--format", "json", cwd=tmp_path, timeout=30)
    assert done.code == 1 and "Traceback" not in done.stderr, done
