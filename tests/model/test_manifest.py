import copy
import json
import shutil

import pytest

from iket_cli.errors import ManifestError
from iket_cli.model import artifacts, manifest, vocab

from conftest import FIXTURES, minimal_manifest

minimal = minimal_manifest


@pytest.mark.parametrize("capture", ["affine", "multi", "spawn"])
def test_scan_counts_match_a_full_parse(tmp_path, capture):
    folder = tmp_path / capture
    shutil.copytree(FIXTURES / capture, folder)
    processes = artifacts.scan_processes(folder)
    assert processes, "every fixture holds at least one process"
    for process in processes:
        trace = json.loads((folder / process["artifacts"]["trace_json"]["path"]).read_text())
        launches = trace["launches"]
        assert process["launches"] == len(launches)
        assert process["ranges"] == sum(len(launch["ranges"]) for launch in launches)
        assert process["markers"] == sum(len(launch["markers"]) for launch in launches)
        names = [launch["kernelName"] for launch in launches]
        assert process["kernels"] == [
            {"name": n, "short": n, "launches": names.count(n)} for n in dict.fromkeys(names)
        ]
        assert set(process["artifacts"]) == {"trace_json", "perfetto", "html", "pftrace_gz"}
        perfetto = process["artifacts"]["perfetto"]
        assert perfetto["bytes"] == (folder / perfetto["path"]).stat().st_size
    assert [p["pid_hex"] for p in processes] == sorted(p["pid_hex"] for p in processes)
    if capture == "spawn":
        assert len(processes) == 2


def test_count_keys_across_chunk_borders(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "_CHUNK", 7)
    path = tmp_path / "t.json"
    path.write_text('{"rangeNameIdx":1,"markerNameIdx":2,"rangeNameIdx":3}' * 5)
    assert artifacts.count_keys(path, (b'"rangeNameIdx"', b'"markerNameIdx"')) == [10, 5]


def test_round_trip(tmp_path):
    record = minimal(
        processes=[
            {
                "pid": 1,
                "pid_hex": "0x1",
                "artifacts": {"trace_json": {"path": "a.json", "bytes": 3}},
                "raw": None,
                "kernels": [],
                "launches": 1,
                "ranges": 2,
                "markers": 3,
            }
        ]
    )
    manifest.write(tmp_path, record)
    assert manifest.read(tmp_path) == record
    assert manifest.read(tmp_path / "manifest.json") == record


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("status"), "status is missing"),
        (lambda r: r.update(status="weird"), "status 'weird'"),
        (lambda r: r.update(schema_version=2), "schema_version 2"),
        (lambda r: r.update(keep="no"), "keep should be bool"),
        (lambda r: r.update(duration_s=True), "duration_s should be"),
        (lambda r: r.update(postprocess=["pdf"]), "format 'pdf'"),
        (lambda r: r["versions"].pop("python"), "versions.python is missing"),
        (lambda r: r.update(processes=[{"pid": 1}]), "processes[0].pid_hex is missing"),
    ],
)
def test_validation_names_the_problem(change, message):
    record = copy.deepcopy(minimal())
    change(record)
    errors = manifest.validate(record)
    assert any(message in e for e in errors), errors


def test_absolute_artifact_paths_are_invalid():
    record = minimal(
        processes=[
            {
                "pid": 1,
                "pid_hex": "0x1",
                "artifacts": {"perfetto": {"path": "/abs.pftrace", "bytes": 1}},
                "raw": None,
                "kernels": [],
                "launches": None,
                "ranges": None,
                "markers": None,
            }
        ]
    )
    assert any("not relative" in e for e in manifest.validate(record))


def test_read_errors_are_clear(tmp_path):
    with pytest.raises(ManifestError, match="not an iket capture"):
        manifest.read(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(ManifestError, match="not readable JSON"):
        manifest.read(tmp_path)
    with pytest.raises(ManifestError, match="refusing to write"):
        manifest.write(tmp_path, {"schema_version": 1})


def test_phases_from_recorded_stats():
    phases = artifacts.phases_from_stats(FIXTURES / "affine" / "run-iket.stats.json")
    assert phases == {"tracker": 8.540742, "config": 0.002362, "capture": 8.523428, "postprocess": 0.001856}
    assert artifacts.phases_from_stats(FIXTURES / "missing.json")["tracker"] is None


def test_formats():
    assert vocab.formats_for("all") == ["perfetto", "json", "html"]
    assert vocab.formats_for("none") == []
    assert vocab.artifacts_for(["html"]) == ["html", "pftrace_gz"]
