"""A CuTe DSL capture end to end on the CPU: the H200's raw capture of examples/cute_pipeline.py,
decoded by iket (flows and report), and captured through the run-iket double with the
workload writing its kernel_symbols.json and DAG as CuTe DSL does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from iket_cli.model import manifest
from iket_cli.render import report

from conftest import FIXTURES, SCRIPTS, kept, run_iket, snapshot

PIPELINE = FIXTURES / "cute_pipeline"


def documented_keys() -> set[str]:
    """Every key named in the first column of docs/manifest.md's tables."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "manifest.md").read_text()
    return {
        key
        for line in text.splitlines()
        if line.startswith("| `")
        for key in re.findall(r"`(\w+)`", line.split("|")[1])
    }


def perfetto_trace(path: Path):
    """Parsed with Perfetto's own schema (perfetto_trace_pb2): a wire-format check."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    parsed = Trace()
    parsed.ParseFromString(path.read_bytes())
    return parsed


def test_postprocess_draws_the_dag_as_perfetto_flows_and_report_arrows(tmp_path):
    folder = kept(tmp_path, "cute_pipeline")
    result = run_iket("postprocess", folder, cwd=tmp_path)
    assert result.code == 0, result
    original = (folder / "iket_pid_0xfc5.pftrace").read_bytes()
    assert original == (PIPELINE / "iket_pid_0xfc5.pftrace").read_bytes(), "run-iket's trace, byte for byte"
    flows_trace = perfetto_trace(folder / "iket_pid_0xfc5.flows.pftrace")
    starts = [i for p in flows_trace.packet for i in p.track_event.flow_ids]
    ends = [i for p in flows_trace.packet for i in p.track_event.terminating_flow_ids]
    assert len(starts) == len(ends) == 1024 and sorted(starts) == sorted(ends), "each arrow has two ends"
    names = {p.track_event.name.split("(")[0] for p in flows_trace.packet if p.track_event.flow_ids}
    assert names == {"load"}
    assert len(flows_trace.packet) == len(perfetto_trace(folder / "iket_pid_0xfc5.pftrace").packet)
    (process,) = manifest.read(folder)["processes"]
    assert (
        process["flows"] == 1024 and process["artifacts"]["flows"]["path"] == "iket_pid_0xfc5.flows.pftrace"
    )
    page = report.embedded(folder / "iket_pid_0xfc5.html")
    (launch,) = page["timelines"][0]["launches"]
    assert launch["flows"] and launch["kinds"] and launch["rp"] and launch["mp"]
    assert {row[3] for row in launch["rows"]} == {"Producer", "Consumer"}, "rows labelled by role"
    assert page["edges"] == [
        {"source": "load", "target": "reduce", "label": "smem[stage]", "via": "mbarrier"}
    ]
    assert page["payload_types"]["5"] == "i32"


def test_a_capture_keeps_what_the_cute_workload_wrote(tmp_path, double):
    """The workload writes kernel_symbols.json into CUTE_DSL_DUMP_DIR and its DAG into the working
    directory, as examples/cute_pipeline.py does; the capture keeps both and draws the arrows."""
    dump = tmp_path / "dump"
    symbols, dag = PIPELINE / "kernel_symbols.json", PIPELINE / "rowsum_pipeline.iket_dag.json"
    (tmp_path / "wl.py").write_text(
        "import os, shutil\n"
        f"shutil.copy({str(symbols)!r}, os.environ['CUTE_DSL_DUMP_DIR'])\n"
        f"shutil.copy({str(dag)!r}, '.')\n"
    )
    dump.mkdir()
    (tmp_path / "stale.iket_dag.json").write_text('{"edges": []}')
    old = 1_000_000_000
    __import__("os").utime(tmp_path / "stale.iket_dag.json", (old, old))
    env = {"IKET_DOUBLE_CAPTURE": str(PIPELINE), "CUTE_DSL_DUMP_DIR": str(dump)}
    result = run_iket("profile", "--run-iket", double, "-o", "cap", "wl.py", cwd=tmp_path, env=env)
    assert result.code == 0, result
    record = manifest.read(tmp_path / "cap")
    assert record["annotations"]["roles"] == "kernel_symbols.json"
    assert record["annotations"]["dags"] == ["rowsum_pipeline.iket_dag.json"], "not the stale one"
    assert record["dsl_cache"] == {"CUTE_DSL_NO_CACHE": "1", "set_by": "iket"}
    (process,) = record["processes"]
    assert process["flows"] == 1024
    assert set(record) | set(process) <= documented_keys(), "docs/manifest.md names every key"
    shown = run_iket("show", "cap", "--by", "role", cwd=tmp_path)
    assert shown.code == 0 and "role Producer" in shown.stdout and "role Consumer" in shown.stdout


def test_roles_given_on_the_command_line(tmp_path, double):
    roles = tmp_path / "roles.json"
    roles.write_text(json.dumps({"warps": {"Loader": {"warp_start": 0, "warp_end": 1}}}))
    (tmp_path / "wl.py").write_text("pass\n")
    env = {"IKET_DOUBLE_CAPTURE": str(PIPELINE)}
    result = run_iket(
        "profile", "--run-iket", double, "-o", "cap", "--roles", roles, "wl.py", cwd=tmp_path, env=env
    )
    assert result.code == 0, result
    assert json.loads((tmp_path / "cap" / "kernel_symbols.json").read_text())["warps"] == {
        "Loader": {"warp_start": 0, "warp_end": 1}
    }
    override = tmp_path / "other.json"
    override.write_text(json.dumps({"warps": {"Everyone": {"warp_start": 0, "warp_end": 5}}}))
    shown = run_iket("show", "cap", "--by", "role", "--roles", override, cwd=tmp_path)
    assert shown.code == 0 and "role Everyone" in shown.stdout and "Loader" not in shown.stdout
    before = snapshot(tmp_path / "cap")
    missing = run_iket(
        "profile", "--run-iket", double, "-o", "cap2", "--roles", "nope.json", "wl.py", cwd=tmp_path
    )
    assert missing.code == 2 and "--roles nope.json does not exist" in missing.stderr
    assert snapshot(tmp_path / "cap") == before


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"warps": {"Producer": [0, 1]}}', '{"warps": {"P": {"warp_start": 2, "warp_end": 1}}}'],
)
def test_a_damaged_kernel_symbols_file_only_warns(tmp_path, text):
    folder = kept(tmp_path, "cute_pipeline")
    (folder / "kernel_symbols.json").write_text(text)
    result = run_iket("postprocess", folder, "--format", "html", cwd=tmp_path)
    assert result.code == 0, result
    assert "iket: warning: warp roles not used:" in result.stderr and "kernel_symbols.json" in result.stderr
    assert report.embedded(folder / "iket_pid_0xfc5.html")["timelines"][0]["launches"][0]["flows"], (
        "arrows still"
    )


def test_a_cute_capture_lints_what_its_trace_cannot_show(tmp_path, double):
    """The probe scripts/cute_unmatched.py compiled for real by CuTe DSL (no GPU needed for
    that), its capture pass replayed from the H200: the hook saw 'value' compiled as i32 and
    f32, the raw capture holds the ranges the decoder dropped; both are linted, recorded, and
    still reported once the raw capture is gone."""
    launched = tmp_path / "launched"
    launched.mkdir()
    (tmp_path / "wl.py").write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(SCRIPTS)!r})\n"
        "import cutlass.cute as cute\n"
        "import cute_unmatched\n"
        "cute.compile(cute_unmatched.unmatched)\n"
        "open(os.path.join(os.environ['IKET_DOUBLE_LAUNCHED'], str(os.getpid())), 'w').close()\n"
    )
    env = {
        "IKET_DOUBLE_CAPTURE": str(FIXTURES / "cute_unmatched"),
        "IKET_DOUBLE_LAUNCHED": str(launched),
        "CUTE_DSL_ARCH": "sm_90a",
    }
    result = run_iket("profile", "--run-iket", double, "-o", "cap", "wl.py", cwd=tmp_path, env=env)
    assert result.code == 0, result
    record = manifest.read(tmp_path / "cap")
    (process,) = record["processes"]
    assert {(s["op"], s["name"], s["type"]) for s in process["payload_sites"]} >= {
        ("mark", "value", "i32"),
        ("mark", "value", "f32"),
        ("range_push", "dangling", None),
    }
    found = {(f["code"], f["message"].split(":")[0]) for f in record["lint"]}
    assert found >= {
        ("payload-type", "'value' is compiled with payloads of types f32, i32"),
        ("unmatched", "range_start or range_end of 'open' without its partner"),
        ("unmatched", "range_push('dangling') never popped"),
    }, found
    assert "[unmatched]" in result.stderr and "[payload-type]" in result.stderr
    assert not (tmp_path / "cap" / "iket").exists(), "no --keep: the raw capture is gone"
    later = run_iket("lint", "cap", "--format", "json", cwd=tmp_path)
    (linted,) = json.loads(later.stdout)["processes"]
    assert {f["code"] for f in linted["findings"]} >= {"unmatched", "payload-type"}, "from the manifest"
