"""``iket merge`` on captures made by ``iket profile`` (replayed H200 raw data)."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from iket_cli.model import manifest

from conftest import FIXTURES, replay, run_iket, tracks


@pytest.fixture
def two_nodes(tmp_path, double):
    (tmp_path / "w.py").write_text("def workload():\n    pass\n")
    for node, capture in (("node-a", "affine"), ("node-b", "multi")):
        result = run_iket(
            "profile",
            "--run-iket",
            double,
            "-o",
            f"caps/{node}",
            "w.py:workload",
            cwd=tmp_path,
            env=replay(capture),
        )
        assert result.code == 0, result
    return tmp_path


def test_merge_links_artifacts_and_lists_every_process(two_nodes):
    caps = two_nodes / "caps"
    result = run_iket("merge", "merged", caps / "node-a", caps / "node-b", "--json", cwd=two_nodes)
    assert result.code == 0, result
    record = manifest.read(two_nodes / "merged")
    assert json.loads(result.stdout) == record
    assert [(p["folder"], p["pid_hex"]) for p in record["processes"]] == [
        ("node-a", "0x204"),
        ("node-b", "0x23f"),
    ]
    merged_trace = two_nodes / "merged" / "node-b" / "iket_pid_0x23f.trace.json"
    assert merged_trace.read_bytes() == (FIXTURES / "multi" / "iket_pid_0x23f.trace.json").read_bytes()
    assert merged_trace.stat().st_ino == (caps / "node-b" / "iket_pid_0x23f.trace.json").stat().st_ino
    shown = run_iket("show", two_nodes / "merged", "--format", "csv", cwd=two_nodes)
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    kernels = {row["kernel"] for row in rows if row["kind"] in ("range", "mark")}
    assert {row["process"] for row in rows} == {"node-a/0x204", "node-b/0x23f"}
    assert kernels == {"profiled_affine_kernel", "scale_loop_kernel", "copy_kernel_kernel"}
    untraced = {row["process"] for row in rows if row["kind"] == "uninstrumented"}
    assert untraced == {"node-a/0x204", "node-b/0x23f"}, "PyTorch's launches of both inputs"
    same = run_iket("diff", two_nodes / "merged", two_nodes / "merged", "--fail-over", "1%", cwd=two_nodes)
    assert same.code == 0, same


def test_copy_makes_independent_files(two_nodes):
    caps = two_nodes / "caps"
    assert run_iket("merge", "m", caps / "node-a", caps / "node-b", "--copy", cwd=two_nodes).code == 0
    copied = two_nodes / "m" / "node-a" / "iket_pid_0x204.trace.json"
    assert copied.stat().st_ino != (caps / "node-a" / "iket_pid_0x204.trace.json").stat().st_ino


def test_conflicts_are_refused(two_nodes):
    caps = two_nodes / "caps"
    twice = run_iket("merge", "m", caps / "node-a", caps / "node-a", cwd=two_nodes)
    assert twice.code == 2 and "is given twice" in twice.stderr
    shutil.copytree(caps / "node-a", caps / "node-a-copy")
    copied = run_iket("merge", "m", caps / "node-a", caps / "node-a-copy", cwd=two_nodes)
    assert copied.code == 2 and "hold the same process" in copied.stderr
    (caps / "plain").mkdir()
    not_capture = run_iket("merge", "m", caps / "node-a", caps / "plain", cwd=two_nodes)
    assert not_capture.code == 2 and "is not an iket capture" in not_capture.stderr
    one = run_iket("merge", "m", caps / "node-a", cwd=two_nodes)
    assert one.code == 2 and "at least two captures" in one.stderr
    assert not (two_nodes / "m").exists()


def test_one_timeline_of_every_process(two_nodes):
    from iket_cli.model import pftrace

    caps = two_nodes / "caps"
    result = run_iket(
        "merge", "m", caps / "node-a", caps / "node-b", "--timeline", "--offset", "node-b=500", cwd=two_nodes
    )
    assert result.code == 0, result
    record = manifest.read(two_nodes / "m")
    assert record["timeline"] == "timeline.pftrace"
    data = (two_nodes / "m" / "timeline.pftrace").read_bytes()
    names = []
    for _, _, packet in pftrace.fields(data):
        for field, _, body in pftrace.fields(packet):
            if field == pftrace.PACKET_TRACK_DESCRIPTOR:
                parts = {f: v for f, _, v in pftrace.fields(body)}
                if pftrace.DESCRIPTOR_PARENT_UUID not in parts:
                    names.append(parts[pftrace.DESCRIPTOR_NAME].decode())
    assert names == ["node-a · pid 0x204", "node-b · pid 0x23f"]
    bad = run_iket("merge", "m2", caps / "node-a", caps / "node-b", "--offset", "node-c=5", cwd=two_nodes)
    assert bad.code == 2 and "not one of the captures" in bad.stderr


def test_the_timeline_leaves_out_processes_without_launches(two_nodes):
    """torchrun's agent comes back as an empty capture: no track of its own on the timeline."""
    node_a = two_nodes / "caps" / "node-a"
    record = manifest.read(node_a)
    artifacts = {}
    for kind, artifact in record["processes"][0]["artifacts"].items():
        name = artifact["path"].replace("0x204", "0x1")
        shutil.copy(node_a / artifact["path"], node_a / name)
        artifacts[kind] = {**artifact, "path": name}
    empty = {**record["processes"][0], "pid": 1, "pid_hex": "0x1", "launches": 0, "kernels": []}
    record["processes"].append({**empty, "artifacts": artifacts})
    manifest.write(node_a, record)
    result = run_iket("merge", "m", node_a, two_nodes / "caps" / "node-b", "--timeline", cwd=two_nodes)
    assert result.code == 0, result

    from iket_cli.model import pftrace

    roots = [
        d[pftrace.DESCRIPTOR_NAME][0].decode()
        for d in tracks((two_nodes / "m" / "timeline.pftrace").read_bytes())
        if pftrace.DESCRIPTOR_PARENT_UUID not in d
    ]
    assert len(roots) == 2 and not any("0x1 " in r or r.endswith("0x1") for r in roots), roots
