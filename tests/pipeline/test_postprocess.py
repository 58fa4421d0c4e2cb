"""``iket postprocess`` through the real CLI: manifests, failures named by file, interrupts."""

from __future__ import annotations

import gzip
import json
import shutil
import signal
import tarfile
import time
from pathlib import Path

from iket_cli.model import manifest
from iket_cli.render import report
from iket_cli.system import tree

from conftest import FIXTURES, all_gone, kept, run_iket, start_iket


def test_cli_on_a_raw_run_iket_folder_creates_the_manifest_and_is_idempotent(tmp_path):
    folder = kept(tmp_path, "spawn")
    first = run_iket("postprocess", folder, "--json", cwd=tmp_path)
    assert first.code == 0, first
    record = manifest.read(folder)
    assert json.loads(first.stdout) == record
    assert record["target"]["kind"] == "unknown" and record["status"] == "ok"
    assert [p["pid_hex"] for p in record["processes"]] == ["0x299", "0x2b5"]
    assert record["processes"][0]["kernels"] == [
        {"name": "profiled_affine_kernel", "short": "profiled_affine_kernel", "launches": 1}
    ]
    before = artifacts(folder)
    again = run_iket("postprocess", folder, "-j", "1", cwd=tmp_path)
    assert again.code == 0, again
    assert artifacts(folder) == before


def test_cli_in_the_capture_folder_itself(tmp_path):
    """``iket postprocess .``: the folder's lock lives beside it, named from its absolute path."""
    folder = kept(tmp_path, "affine")
    done = run_iket("postprocess", ".", "--format", "json", cwd=folder)
    assert done.code == 0 and "Traceback" not in done.stderr, done
    assert manifest.read(folder)["status"] == "ok"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no lock left beside it"


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


def test_sigterm_while_decoding_stops_the_workers_and_leaves_no_debris(tmp_path):

    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    folder = tmp_path / "keep256"
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    proc = start_iket("postprocess", folder, "--format", "json", cwd=tmp_path)
    deadline = time.monotonic() + 30
    workers: list[int] = []
    while time.monotonic() < deadline and not workers:
        workers = tree.descendants(proc.pid)
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


def test_the_decode_hands_its_counts_and_traces_on_nothing_reads_the_merged_file(tmp_path, monkeypatch):
    """A JSON export merged from its launches, with html: the manifest's counts and the
    report's trace come from the decode's outcome, not a read of the file (by count or by
    load), and they equal what a read finds."""
    from iket_cli.decode import pool
    from iket_cli.model import artifacts as artifacts_mod
    from iket_cli.model import trace as trace_mod
    from iket_cli.pipeline.postprocess import postprocess_capture

    monkeypatch.setattr(pool, "INLINE_BYTES", -1)  # workers and the merge, as for a big capture
    folder = kept(tmp_path, "multi")
    reads: list[str] = []
    load, count = trace_mod.load, artifacts_mod.count_keys
    monkeypatch.setattr(trace_mod, "load", lambda path, *a: reads.append(Path(path).name) or load(path, *a))
    monkeypatch.setattr(
        artifacts_mod, "count_keys", lambda path, keys: reads.append(Path(path).name) or count(path, keys)
    )
    record, outcomes, _ = postprocess_capture(folder, ["json", "html"], jobs=2)
    assert all(o.error is None for o in outcomes), "decoded"
    assert all(o.split is None or o.split.trace is None for o in outcomes), "handed on"
    assert reads == [], f"read again: {reads}"
    (process,) = record["processes"]
    path = folder / process["artifacts"]["trace_json"]["path"]
    assert [process["ranges"], process["markers"]] == count(path, artifacts_mod.RECORD_KEYS)
    assert (folder / process["artifacts"]["html"]["path"]).stat().st_size > 0


def test_at_most_two_assembled_traces_are_held():
    """A capture of many big processes: the pool keeps the last two tasks' traces only."""
    from iket_cli.decode import pool
    from iket_cli.decode.tasks import Joined, Outcome

    outcomes = [Outcome(task=None, seconds=0.0, split=Joined(trace=object())) for _ in range(4)]
    with pool.start([], jobs=1) as decoding:
        for outcome in outcomes:
            decoding._hold(outcome)
    assert [o.split.trace is not None for o in outcomes] == [False, False, True, True]


def test_an_export_from_json_traces_holds_the_last_ones_only(tmp_path):
    """A folder of many JSON traces: the export from the JSON lets each trace go once the
    next ones fill what it may hold, as the pool does (the lint and report read the others)."""
    from iket_cli.pipeline import trace_exports

    for name in ("iket_pid_0x23f.trace.json",):
        shutil.copy(FIXTURES / "multi" / name, tmp_path)
    for name in ("iket_pid_0x299.trace.json", "iket_pid_0x2b5.trace.json"):
        shutil.copy(FIXTURES / "spawn" / name, tmp_path)
    held = trace_exports.write(tmp_path, ["perfetto"], hold=2)
    assert list(held) == ["iket_pid_0x299.trace.json", "iket_pid_0x2b5.trace.json"]
    assert len(list(tmp_path.glob("*.pftrace"))) == 3
    assert trace_exports.write(tmp_path, ["perfetto"]) == {}, "nothing held unless asked"


def test_the_manifest_says_how_a_perfetto_export_was_joined(tmp_path, monkeypatch):
    """A Perfetto export joined from CTA chunks is run-iket's trace, not its bytes: the
    manifest's artifact says so (parts, identity), and a later rescan keeps it."""
    from iket_cli.decode import pool
    from iket_cli.decode.split import chunks
    from iket_cli.model import artifacts as artifacts_mod
    from iket_cli.pipeline.postprocess import postprocess_capture

    monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)
    monkeypatch.setattr(chunks, "perfetto_chunk_bytes", lambda raw_bytes, cpus: 1)
    folder = kept(tmp_path, "cute_pipeline")
    record, outcomes, _ = postprocess_capture(folder, ["perfetto", "html"], jobs=2)
    assert all(o.error is None for o in outcomes)
    (process,) = record["processes"]
    assert process["artifacts"]["perfetto"]["joined"] == {"parts": 8, "identity": "trace"}
    assert process["artifacts"]["pftrace_gz"]["joined"] == {"parts": 8, "identity": "trace"}
    assert "joined" not in process["artifacts"]["html"]
    (again,) = artifacts_mod.rescan(folder, record["processes"])
    assert again["artifacts"]["perfetto"]["joined"] == {"parts": 8, "identity": "trace"}


def test_a_split_perfetto_export_alone_leaves_numpy_to_the_workers(tmp_path):
    """The CLI only plans and joins a split Perfetto export: numpy's import (a tenth of a
    second, and a BLAS thread) is the workers' alone (docs/history/benchmarks.md)."""
    import subprocess
    import sys

    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    folder = tmp_path / "keep256"
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('numpy' in sys.modules, 'iket' in sys.modules))\n"
        f"sys.argv = ['iket', 'postprocess', {str(folder)!r}, '--format', 'perfetto', '-q']\n"
        "from iket_cli.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"], "neither numpy nor NVIDIA's decoder in the CLI"
    (process,) = manifest.read(folder)["processes"]
    assert process["artifacts"]["perfetto"]["joined"]["parts"] > 1, "the export was split"


def test_cli_writes_perfetto_from_json_traces_alone(tmp_path):
    """A folder of JSON traces and no raw capture (an in-process window's): the Perfetto trace
    is written from the JSON, byte for byte NVIDIA's export of the same capture here, and the
    folder is reported like any capture; the JSON traces stay."""
    folder = tmp_path / "window"
    folder.mkdir()
    shutil.copy(FIXTURES / "multi" / "iket_pid_0x23f.trace.json", folder)
    done = run_iket("postprocess", folder, "--json", cwd=tmp_path)
    assert done.code == 0 and "Traceback" not in done.stderr, done
    written = folder / "iket_pid_0x23f.pftrace"
    assert written.read_bytes() == (FIXTURES / "multi" / "iket_pid_0x23f.pftrace").read_bytes()
    record = manifest.read(folder)
    assert json.loads(done.stdout) == record
    assert set(record["processes"][0]["artifacts"]) == {"trace_json", "perfetto", "pftrace_gz", "html"}
    assert record["processes"][0]["ranges"] == 208 and record["postprocess"] == ["perfetto", "json", "html"]
    assert gzip.decompress((folder / "iket_pid_0x23f.pftrace.gz").read_bytes()) == written.read_bytes()
    only = run_iket("postprocess", folder, "--format", "perfetto", cwd=tmp_path)
    assert only.code == 0 and (folder / "iket_pid_0x23f.trace.json").is_file(), only


def test_cli_on_a_folder_with_neither_raw_capture_nor_json_trace(tmp_path):
    (tmp_path / "empty").mkdir()
    done = run_iket("postprocess", tmp_path / "empty", cwd=tmp_path)
    assert done.code == 2 and "no raw capture" in done.stderr and "no JSON trace" in done.stderr, done
    assert "Traceback" not in done.stderr


def test_cli_on_a_damaged_json_trace_alone_names_it_and_keeps_the_folder(tmp_path):
    folder = tmp_path / "window"
    folder.mkdir()
    (folder / "iket_pid_0x1.trace.json").write_text('{"launches": [')
    done = run_iket("postprocess", folder, cwd=tmp_path)
    assert done.code not in (0, 1) and "iket_pid_0x1.trace.json" in done.stderr, done
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 2
    assert sorted(p.name for p in folder.iterdir()) == ["iket_pid_0x1.trace.json"]


def test_a_folder_of_lossy_json_traces_stays_incomplete_after_postprocess(tmp_path):
    """Before: ``iket show`` said INCOMPLETE, and after ``iket postprocess`` (complete: null, no
    losses in the new manifest) show, report and diff said nothing."""
    folder = tmp_path / "json-only"
    folder.mkdir()
    shutil.copy(next((FIXTURES / "loss_budget").glob("iket_pid_*.trace.json")), folder)
    assert "INCOMPLETE" in run_iket("show", folder, cwd=tmp_path).stderr
    done = run_iket("postprocess", folder, cwd=tmp_path)
    assert done.code == 0, done
    record = manifest.read(folder)["completeness"]
    assert record["complete"] is False and "trace" in record["checked"]
    assert [(loss["cause"], loss["pid_hex"]) for loss in record["losses"]] == [("budget", "0x22d")]
    shown = run_iket("show", folder, cwd=tmp_path)
    assert "INCOMPLETE" in shown.stderr + shown.stdout, shown
    gated = run_iket("diff", folder, folder, "--fail-over", "5%", cwd=tmp_path)
    assert gated.code == 1 and "the gate cannot pass" in gated.stderr, gated


def test_a_trace_name_on_a_fifo_or_a_device_is_refused_in_one_line_without_waiting(tmp_path):
    """A FIFO (or a link to /dev/zero) named like a trace: said as what it is, never read."""
    import os

    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "iket_pid_0x1.trace.json")
    zero = tmp_path / "zero"
    zero.mkdir()
    (zero / "iket_pid_0x1.trace.json").symlink_to("/dev/zero")
    for folder in (fifo, zero):
        for fmt in ("json", "all"):
            done = run_iket("postprocess", folder, "--format", fmt, cwd=tmp_path, timeout=30)
            assert done.code == 2, done
            assert "is not a regular file (a FIFO, a device or a link to one)" in done.stderr
            assert "Traceback" not in done.stderr and not (folder / "manifest.json").exists()


def test_a_damaged_json_trace_is_refused_not_published_as_ok(tmp_path):
    """``postprocess --format json`` of garbage, an empty document or ``[]`` exited 0, status ok."""
    for name, text in (("garbage", "not json"), ("empty", ""), ("array", "[]")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "iket_pid_0x1.trace.json").write_text(text)
        done = run_iket("postprocess", folder, "--format", "json", cwd=tmp_path)
        assert done.code == 2, done
        assert "Traceback" not in done.stderr and not (folder / "manifest.json").exists(), done
