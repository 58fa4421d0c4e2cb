"""CuTe DSL captures from the H200 (tests/fixtures/cute_affine, cute_pipeline): token ranges,
payloads, warp roles and DAG arrows, each checked against an independent recount of the JSON."""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from pathlib import Path

import pytest

from iket_cli.analysis import flows, lint, payloads
from iket_cli.model import annotations, trace

from conftest import FIXTURES, run_iket

CAPTURES = {
    "cute_affine": FIXTURES / "cute_affine" / "iket_pid_0xf1f.trace.json",
    "cute_pipeline": FIXTURES / "cute_pipeline" / "iket_pid_0xfc5.trace.json",
}
ROLES = {"Producer": range(0, 1), "Consumer": range(1, 5)}


def recount(path: Path, role: str | None = None) -> dict:
    """(kernel, range name) -> (count, total, min, max), from json.load alone."""
    doc = json.loads(path.read_text())
    found: dict = defaultdict(list)
    for launch in doc["launches"]:
        for r in launch["ranges"]:
            warp = doc["locationTable"][r["warpLocIdxs"][0]]["warpId"]
            if role is None or warp in ROLES[role]:
                found[(launch["kernelName"], doc["stringTable"][r["rangeNameIdx"]])].append(
                    r["endTs"] - r["startTs"]
                )
    return {key: (len(v), sum(v), min(v), max(v)) for key, v in found.items()}


def shown(result_stdout: str, group: str = "") -> dict:
    data = json.loads(result_stdout)
    return {
        (kernel["kernel"], row["name"]): (
            row["durations"]["count"],
            row["durations"]["total"],
            row["durations"]["min"],
            row["durations"]["max"],
        )
        for process in data["processes"]
        if process["group"] == group
        for kernel in process["kernels"]
        for row in kernel["ranges"]
    }


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_show_equals_a_recount_of_token_and_stack_ranges(tmp_path, name):
    result = run_iket("show", CAPTURES[name], "--format", "json", cwd=tmp_path)
    assert result.code == 0, result
    assert shown(result.stdout) == recount(CAPTURES[name])


def test_ranges_keep_their_kind():
    loaded = trace.load(CAPTURES["cute_pipeline"])
    launch = loaded.launches[0]
    kinds = {(loaded.name(n), k) for n, k in zip(launch.ranges.name, launch.ranges.kind, strict=True)}
    assert kinds == {("load", 1), ("tile", 1), ("wait", 1), ("reduce", 2)}, "token ranges vs push/pop"


def test_payloads_equal_a_recount(tmp_path):
    doc = json.loads(CAPTURES["cute_affine"].read_text())
    (launch,) = doc["launches"]
    stored = sorted(
        struct.unpack("<f", struct.pack("<I", m["payloadVal"]))[0]
        for m in launch["markers"]
        if m.get("payloadType") == 13
    )
    assert stored == [32.0 * warp for warp in range(32)], "fp32 bit patterns: lane 0's x per warp"
    rows = {(r.kind, r.name): r for r in payloads.payloads(trace.load(CAPTURES["cute_affine"]))}
    assert rows[("mark", "stored")].types == ["f32"] and (
        rows[("mark", "stored")].min,
        rows[("mark", "stored")].max,
    ) == (0.0, 992.0)
    assert rows[("range", "load")].values == [float(cta) for cta in range(8)], "the CTA index, as Int32"
    assert ("mark", "loaded") not in rows and ("range end", "load") not in rows, "no payload; equal ends"
    result = run_iket("show", FIXTURES / "cute_pipeline", "--payload", "--format", "json", cwd=tmp_path)
    assert result.code == 0, result
    (process,) = json.loads(result.stdout)["processes"]
    got = {(p["kind"], p["name"]): p for p in process["payloads"]}
    assert got[("mark", "stage_full")]["values"] == [0.0, 1.0, 2.0], "the ring's three stages"
    assert (
        got[("range", "load")]["min"],
        got[("range", "load")]["max"],
        got[("range", "load")]["distinct"],
    ) == (0, 31, 32)


def test_show_by_role_equals_a_recount(tmp_path):
    result = run_iket("show", FIXTURES / "cute_pipeline", "--by", "role", "--format", "json", cwd=tmp_path)
    assert result.code == 0, result
    for role in ROLES:
        assert shown(result.stdout, f"role {role}") == recount(CAPTURES["cute_pipeline"], role)
    bare = run_iket("show", CAPTURES["cute_pipeline"], "--by", "role", "--format", "json", cwd=tmp_path)
    assert bare.code == 0, "a trace file finds the kernel_symbols.json beside it"
    other = run_iket("show", FIXTURES / "multi", "--by", "role", cwd=tmp_path)
    assert other.code == 2 and "pass --roles FILE" in other.stderr


def test_dag_arrows_pair_each_load_with_each_consumers_reduce():
    loaded = trace.load(CAPTURES["cute_pipeline"])
    dags = annotations.dags_for(FIXTURES / "cute_pipeline")
    found = flows.flows(loaded, dags)
    assert len(found) == 256 * 4, "each of 256 loads feeds the reduce of 4 consumer warps"
    ranges, locs = loaded.launches[0].ranges, loaded.locations
    for f in found:
        assert loaded.name(ranges.name[f.source]) == "load" and loaded.name(ranges.name[f.target]) == "reduce"
        assert locs[ranges.loc[f.source]]["ctaId"] == locs[ranges.loc[f.target]]["ctaId"]
        assert ranges.start[f.target] >= ranges.end[f.source], "a reduce starts after its load ended"


def test_annotation_files_that_are_not_what_they_say(tmp_path):
    bad = tmp_path / "kernel_symbols.json"
    bad.write_text('{"warps": {"Producer": {"warp_start": 3, "warp_end": 1}}}')
    with pytest.raises(Exception, match="has no warp_start < warp_end"):
        annotations.read_roles(bad)
    dag = tmp_path / "x.iket_dag.json"
    dag.write_text('{"edges": [{"source": "a"}]}')
    with pytest.raises(Exception, match="has no source and target"):
        annotations.read_dag(dag)
    roles = annotations.read_roles(FIXTURES / "cute_pipeline" / "kernel_symbols.json")
    assert [roles.role(w) for w in range(6)] == [
        "Producer",
        "Consumer",
        "Consumer",
        "Consumer",
        "Consumer",
        None,
    ]


def test_lint_flags_a_name_with_two_payload_types(tmp_path):
    doc = json.loads(CAPTURES["cute_affine"].read_text())
    marks = doc["launches"][0]["markers"]
    stored = next(m for m in marks if m.get("payloadType") == 13)
    stored["payloadType"] = 5  # one "stored" mark as an i32: the name's values no longer compare
    path = tmp_path / "x.trace.json"
    path.write_text(json.dumps(doc))
    (finding,) = [f for f in lint.lint(trace.load(path)) if f.code == "payload-type"]
    assert "mark 'stored' carries payloads of types i32, f32" in finding.message
    assert [f.code for f in lint.lint(trace.load(CAPTURES["cute_pipeline"]))] == []
