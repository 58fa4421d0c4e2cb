"""Post-processing on the real raw captures recorded on the H200, with the real decoder."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from iket_cli import manifest, postprocess, report, runner
from iket_cli.errors import UsageError

from conftest import FIXTURES, all_gone, run_iket, start_iket

CAPTURES = {"affine": ["0x204"], "multi": ["0x23f"], "spawn": ["0x299", "0x2b5"]}


def kept(tmp_path: Path, name: str) -> Path:
    """A copy of a kept capture with its final artifacts removed: only raw data left."""
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    for path in folder.glob("iket_pid_*"):
        path.unlink()
    return folder


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_artifacts_identical_to_run_iket_on_the_h200(tmp_path, name):
    folder = kept(tmp_path, name)
    outcomes = postprocess.run(postprocess.plan(folder, list(postprocess.FORMATS)))
    assert [o.error for o in outcomes] == [None] * len(outcomes)
    for pid in CAPTURES[name]:
        stem = f"iket_pid_{pid}"
        for suffix in (".trace.json", ".pftrace"):  # .html is iket's own offline report
            assert (folder / f"{stem}{suffix}").read_bytes() == (
                FIXTURES / name / f"{stem}{suffix}"
            ).read_bytes()
        ours = (folder / f"{stem}.pftrace.gz").read_bytes()
        assert gzip.decompress(ours) == (FIXTURES / name / f"{stem}.pftrace").read_bytes()
        assert ours[4:8] == b"\0\0\0\0", "zero mtime: reproducible"


def test_identical_to_run_iket_postprocess_here(tmp_path, real_run_iket):
    """The same raw capture through `run-iket postprocess` on this machine."""
    ours, theirs = kept(tmp_path, "multi"), kept(tmp_path / "r", "multi")
    postprocess.run(postprocess.plan(ours, ["json", "perfetto"]))
    from iket_cli import toolchain

    env = toolchain.find().child_env(dict(os.environ))
    subprocess.run(
        [str(real_run_iket), "postprocess", str(theirs), "--format", "all"],
        check=True,
        env=env,
        capture_output=True,
    )
    for suffix in (".trace.json", ".pftrace"):
        assert (ours / f"iket_pid_0x23f{suffix}").read_bytes() == (
            theirs / f"iket_pid_0x23f{suffix}"
        ).read_bytes()


def test_exact_numbers(tmp_path):
    folder = kept(tmp_path, "affine")
    postprocess.run(postprocess.plan(folder, ["json"]))
    trace = json.loads((folder / "iket_pid_0x204.trace.json").read_text())
    (launch,) = trace["launches"]
    (rng,), (mark,) = launch["ranges"], launch["markers"]
    assert trace["stringTable"][rng["rangeNameIdx"]] == "affine"
    assert rng["endTs"] - rng["startTs"] == 224
    assert trace["stringTable"][mark["markerNameIdx"]] == "loaded"
    assert mark["timestamp"] - rng["startTs"] == 64


@pytest.mark.parametrize("inline", [True, False], ids=["in-process", "worker-process"])
def test_corrupt_and_missing_files_are_named_others_still_decoded(tmp_path, monkeypatch, inline):
    if not inline:
        monkeypatch.setattr(postprocess, "INLINE_BYTES", -1)
    folder = kept(tmp_path, "spawn")
    data = folder / "iket" / "pid_0x299" / "iket.data.bin"
    data.write_bytes(data.read_bytes()[:16])
    outcomes = postprocess.run(postprocess.plan(folder, ["json", "perfetto"]))
    errors = {o.task.pid_hex: o.error for o in outcomes}
    assert "iket.data.bin is truncated" in errors["0x299"] and str(data) in errors["0x299"]
    assert (folder / "iket_pid_0x2b5.trace.json").read_bytes() == (
        FIXTURES / "spawn" / "iket_pid_0x2b5.trace.json"
    ).read_bytes()
    (folder / "iket" / "pid_0x2b5" / "iket.data.json").write_text("{not json")
    (outcome, *_) = [
        o for o in postprocess.run(postprocess.plan(folder, ["json"])) if o.task.pid_hex == "0x2b5"
    ]
    assert "is not a raw capture manifest" in outcome.error


def test_cli_on_a_raw_run_iket_folder_creates_the_manifest_and_is_idempotent(tmp_path):
    folder = kept(tmp_path, "spawn")
    first = run_iket("postprocess", folder, "--json", cwd=tmp_path)
    assert first.code == 0, first
    record = manifest.read(folder)
    assert json.loads(first.stdout) == record
    assert record["target"]["kind"] == "unknown" and record["status"] == "ok"
    assert [p["pid_hex"] for p in record["processes"]] == ["0x299", "0x2b5"]
    assert record["processes"][0]["kernels"] == [{"name": "profiled_affine_kernel", "launches": 1}]
    before = artifacts(folder)
    again = run_iket("postprocess", folder, "-j", "1", cwd=tmp_path)
    assert again.code == 0, again
    assert artifacts(folder) == before


def artifacts(folder: Path) -> dict:
    """Every artifact's bytes; for the HTML reports what they show, less the run's own times."""
    found = {}
    for path in folder.glob("iket_pid_*"):
        if path.suffix == ".html":
            data = report.embedded(path)
            found[path.name] = (data["stats"], data["timelines"], data["perfetto"])
        else:
            found[path.name] = path.read_bytes()
    return found


def test_cli_reports_broken_process_by_name_exit_1(tmp_path):
    folder = kept(tmp_path, "spawn")
    (folder / "iket" / "pid_0x2b5" / "iket.data.bin").unlink()
    result = run_iket("postprocess", folder, "--format", "json", cwd=tmp_path)
    assert result.code == 1, result
    assert f"{folder}/iket/pid_0x2b5/iket.data.bin is missing" in result.stderr
    assert (folder / "iket_pid_0x299.trace.json").is_file()
    record = manifest.read(folder)
    assert record["status"] == "failed" and "pid_0x2b5" in record["error"]["message"]


def test_cli_refuses_a_folder_without_raw_capture(tmp_path):
    result = run_iket("postprocess", tmp_path, cwd=tmp_path)
    assert result.code == 2, result
    assert "holds no raw capture" in result.stderr and "--keep" in result.stderr


def test_plan_and_jobs(tmp_path, monkeypatch):
    folder = kept(tmp_path, "spawn")
    tasks = postprocess.plan(folder, ["html"])
    assert sorted((t.pid_hex, t.export) for t in tasks) == [
        ("0x299", "json"),
        ("0x299", "perfetto"),
        ("0x2b5", "json"),
        ("0x2b5", "perfetto"),
    ], "the report is made from the JSON trace"
    perfetto = next(t for t in tasks if t.export == "perfetto")
    assert perfetto.outputs() == [f"iket_pid_{perfetto.pid_hex}.pftrace.gz"]
    with pytest.raises(UsageError, match="unknown format"):
        postprocess.plan(folder, ["pdf"])
    assert postprocess.default_jobs(tasks[:2], 8) == 2, "no more workers than tasks"
    monkeypatch.setattr(postprocess, "_mem_available", lambda: 1)
    assert postprocess.default_jobs(tasks, 8) == 1, "memory bounds the workers"


def test_sigterm_while_decoding_stops_the_workers_and_leaves_no_debris(tmp_path):

    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    folder = tmp_path / "keep256"
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    proc = start_iket("postprocess", folder, "--format", "json", cwd=tmp_path)
    deadline = time.monotonic() + 30
    workers: list[int] = []
    while time.monotonic() < deadline and not workers:
        workers = runner.descendants(proc.pid)
        time.sleep(0.05)
    assert workers, "a worker process decodes a capture this large"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM while decoding" in err
    assert all_gone(workers)
    after = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    assert after == before, "no half-written artifact or launch part left behind"


def test_html_alone_keeps_a_json_trace_decoded_before(tmp_path):
    """The report needs the JSON export; it is removed afterwards only if this run made it."""
    folder = kept(tmp_path, "affine")
    assert run_iket("postprocess", folder, "--format", "json", cwd=tmp_path).code == 0
    before = (folder / "iket_pid_0x204.trace.json").read_bytes()
    assert run_iket("postprocess", folder, "--format", "html", cwd=tmp_path).code == 0
    assert (folder / "iket_pid_0x204.trace.json").read_bytes() == before
    assert manifest.read(folder)["postprocess"] == ["json", "html"]
    fresh = kept(tmp_path / "fresh", "affine")
    assert run_iket("postprocess", fresh, "--format", "html", cwd=tmp_path).code == 0
    assert sorted(p.name for p in fresh.glob("iket_pid_*")) == [
        "iket_pid_0x204.html",
        "iket_pid_0x204.pftrace.gz",
    ], "the JSON made only for the report is gone"
    (process,) = manifest.read(fresh)["processes"]
    assert (process["ranges"], process["markers"]) == (1, 1), "counts kept from the JSON"
