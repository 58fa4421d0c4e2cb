"""Issue 17 through the real CLI: readable kernel names on every human surface, warp-trace
captures shown as what they are, uninstrumented launches listed, console lines a person
reads. The captures are the H200's (``warp_multi``, ``multi``, ``torch_warp``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from iket_cli.model import manifest
from iket_cli.render import report

from conftest import FIXTURES, replay, run_iket

MANGLED = re.compile(r"_Z[NZL]?\d|_ZN")
GEMM = "cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>"


def no_mangled(text: str) -> None:
    found = MANGLED.search(text)
    assert found is None, f"a mangled name: ...{text[max(0, found.start() - 60) : found.start() + 60]}..."


# -- iket show ------------------------------------------------------------------------


def test_show_of_a_warp_trace_is_a_table_of_launches(torch_warp):
    result = run_iket("show", torch_warp, cwd=torch_warp)
    assert result.code == 0, result
    no_mangled(result.stdout + result.stderr)
    assert "warp trace · 27 launch(es) of 7 kernel(s)" in result.stdout
    for name in (GEMM, "at::native::reduce_kernel<…>", "softmax_warp_forward<…>"):
        assert name in result.stdout, "whole names, never cut"
    assert "empty-launch" not in result.stderr, "a warp trace records no event by design"
    assert result.stderr == ""


def test_show_json_keeps_the_symbol_and_gives_the_full_name(torch_warp):
    result = run_iket("show", torch_warp, "--format", "json", cwd=torch_warp)
    (process,) = json.loads(result.stdout)["processes"]
    assert process["mode"] == "warp-trace" and process["kernels"] == [] and process["findings"] == []
    gemm = next(k for k in process["launches"] if k["name"] == GEMM)
    assert gemm["kernel"] == "_ZN7cutlass7Kernel2I43cutlass_80_simt_sgemm_256x128_8x4_nn_align1EEvNT_6ParamsE"
    assert gemm["demangled"].startswith("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(")
    assert gemm["launches"] == 4 and gemm["sms"] == 128 and gemm["span"]["count"] == 4


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("cutlass::Kernel2*", GEMM),  # the short name
        ("sgemm", GEMM),  # a substring
        ("_ZN43_GLOBAL__N__b6de9c8c_10_SoftMax*", "softmax_warp_forward<…>"),  # the raw symbol
        ("*softmax_warp_forward<float, float, float, 11*", "softmax_warp_forward<…>"),  # the demangled
    ],
)
def test_kernel_filter_matches_every_form_of_the_name(torch_warp, pattern, expected):
    result = run_iket("show", torch_warp, "--kernel", pattern, "--format", "json", cwd=torch_warp)
    assert result.code == 0, result
    (process,) = json.loads(result.stdout)["processes"]
    assert [k["name"] for k in process["launches"]] == [expected]


def test_an_unmatched_filter_names_the_kernels_readably(torch_warp):
    result = run_iket("show", torch_warp, "--kernel", "no_such_kernel", cwd=torch_warp)
    assert result.code == 2, result
    assert "its kernels:" in result.stderr and GEMM in result.stderr
    no_mangled(result.stderr)


def test_show_by_sm_of_a_warp_trace(tmp_path):
    result = run_iket("show", FIXTURES / "warp_multi", "--by", "sm", "--format", "json", cwd=tmp_path)
    assert result.code == 0, result
    groups = json.loads(result.stdout)["processes"]
    assert len(groups) > 1 and all(g["group"].startswith("sm ") for g in groups)
    assert all(k["sms"] == 1 for g in groups for k in g["launches"]), "one SM per group"
    # every warp lands in exactly one SM's group
    total = sum(k["warp_lifetimes"]["count"] for g in groups for k in g["launches"])
    doc = json.loads((FIXTURES / "warp_multi" / "iket_pid_0x7c4.trace.json").read_text())
    assert total == sum(len(launch["warpLifetimes"]) for launch in doc["launches"])


def test_an_instrumented_capture_lists_its_uninstrumented_launches(tmp_path):
    result = run_iket("show", FIXTURES / "multi", cwd=tmp_path)
    assert result.code == 0, result
    no_mangled(result.stdout + result.stderr)
    assert "not instrumented (launched, not traced): 23 launch(es) of 12 kernel(s)" in result.stdout
    assert "at::native::vectorized_elementwise_kernel<…AbsFunctor…>" in result.stdout
    assert "empty-launch" not in result.stderr
    csv = run_iket("show", FIXTURES / "multi", "--format", "csv", cwd=tmp_path).stdout
    assert csv.count(",uninstrumented,") == 12


# -- iket lint ----------------------------------------------------------------------------


@pytest.mark.parametrize("capture", ["warp_multi", "torch"])
def test_lint_applies_no_event_check_to_a_warp_trace(capture, torch_warp, tmp_path):
    where = torch_warp if capture == "torch" else FIXTURES / capture
    result = run_iket("lint", where, cwd=tmp_path)
    assert result.code == 0, result
    assert "no instrumentation problem found" in result.stderr + result.stdout


def test_a_bare_warp_trace_without_its_folder_is_linted_as_one(tmp_path):
    shutil.copy(FIXTURES / "warp_multi" / "iket_pid_0x7c4.trace.json", tmp_path)
    result = run_iket("lint", tmp_path / "iket_pid_0x7c4.trace.json", cwd=tmp_path)
    assert result.code == 0 and "empty-launch" not in result.stdout + result.stderr, result


# -- iket diff ----------------------------------------------------------------------------


def slower(source: Path, out: Path, kernel: str, factor: float) -> Path:
    """A copy of a warp-trace capture in which every warp of ``kernel`` lasts ``factor`` times longer."""
    out.mkdir()
    trace = next(source.glob("*.trace.json"))
    doc = json.loads(trace.read_text())
    for launch in doc["launches"]:
        if launch["kernelName"] == kernel:
            for warp in launch["warpLifetimes"]:
                warp["endTs"] = warp["startTs"] + int((warp["endTs"] - warp["startTs"]) * factor)
    (out / trace.name).write_text(json.dumps(doc))
    return out


def test_diff_of_two_warp_traces_compares_launch_spans_and_gates(tmp_path):
    base = FIXTURES / "warp_multi"
    new = slower(base, tmp_path / "new", "scale_loop_kernel", 3.0)
    result = run_iket("diff", base, new, "--format", "json", cwd=tmp_path)
    assert result.code == 0, result
    changes = {c["name"]: c for c in json.loads(result.stdout)["changes"]}
    assert len(changes) == 14 and all(c["range"] == "launch span" for c in changes.values())
    assert changes["scale_loop_kernel"]["ratio"] > 1.5
    assert changes["at::native::reduce_kernel<…>"]["ratio"] == 1.0
    gate = run_iket("diff", base, new, "--fail-over", "20%", cwd=tmp_path)
    assert gate.code == 1, gate
    assert "scale_loop_kernel / launch span" in gate.stderr
    no_mangled(gate.stdout + gate.stderr)


# -- iket report ----------------------------------------------------------------------------


def test_report_of_a_warp_trace_names_kernels_and_carries_occupancy(torch_warp, tmp_path):
    page = report.embedded(report.write(torch_warp, tmp_path / "r.html"))
    (stats,) = page["stats"]
    assert stats["mode"] == "warp-trace" and len(stats["launches"]) == 7
    launches = page["timelines"][0]["launches"]
    assert len(launches) == 27
    for launch in launches:
        assert not launch["name"].startswith("_Z") and launch["demangled"].startswith("void ")
        assert launch["occ"] is not None and launch["occ"]["bins"] > 0
        assert len(launch["rows"]) <= 2048 and launch["total_rows"] >= len(launch["rows"])
    reduce = next(x for x in launches if x["name"] == "at::native::reduce_kernel<…>")
    # 128 CTAs of 16 warps on 128 SMs: 16 warps resident on each, at most
    assert len(reduce["occ"]["sms"]) == 128 and reduce["occ"]["peak"] == 1600


# -- iket profile: the console and the manifest ----------------------------------------------


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "w.py").write_text("def workload():\n    print('workload ran')\n")
    return tmp_path


def test_profile_warp_trace_records_the_mode_and_reads_well(work, double):
    env = {**replay("multi"), "IKET_DOUBLE_WARP_CAPTURE": str(FIXTURES / "warp_multi")}
    result = run_iket(
        "profile", "--run-iket", double, "--warp-trace", "-o", "cap", "w.py:workload", cwd=work, env=env
    )
    assert result.code == 0, result
    record = manifest.read(work / "cap")
    assert record["mode"] == "warp-trace" and record["lint"] == []
    (process,) = record["processes"]
    assert {k["short"] for k in process["kernels"]} >= {"scale_loop_kernel", "at::native::reduce_kernel<…>"}
    assert process["uninstrumented"] == [], "a warp trace traces every launch"
    no_mangled(result.stderr)
    assert "27 launches · 0 ranges · 0 marks" in result.stderr
    assert "and 10 more (iket show)" in result.stderr, "14 kernels: four named, the rest counted"
    assert "runs twice" not in result.stderr, "no tracker pass in warp-trace mode"
    show = run_iket("show", work / "cap", cwd=work)
    assert "warp trace · 27 launch(es) of 14 kernel(s)" in show.stdout and show.stderr == "", show


def test_profile_console_lines_say_the_passes_and_agree_with_the_manifest(work, double):
    result = run_iket(
        "profile", "--run-iket", double, "-o", "cap", "w.py:workload", cwd=work, env=replay("affine")
    )
    assert result.code == 0, result
    record = manifest.read(work / "cap")
    assert record["mode"] == "instrumented"
    err = result.stderr
    assert err.count("the workload runs twice") == 1
    assert err.index("runs twice") < err.index("iket: tracker pass...") < err.index("iket: capture pass...")
    assert "1 launch · 1 range · 1 mark" in err
    phases = record["phases"]
    line = next(x for x in err.splitlines() if x.startswith("iket: phases:"))
    for name, label in (
        ("tracker", "tracker pass"),
        ("capture", "capture pass"),
        ("postprocess", "postprocess"),
    ):
        assert f"{label} {phases[name]:.2f} s" in line
    said = float(re.search(r"iket: postprocess done in ([\d.]+) s", err)[1])
    assert abs(said - phases["postprocess"]) < 0.25, "the live line covers what the manifest counts"
    (process,) = record["processes"]
    assert sum(u["launches"] for u in process["uninstrumented"]) == 17, "PyTorch's launches around the kernel"


def test_run_options_have_help(tmp_path):
    result = run_iket("run", "--help", cwd=tmp_path)
    text = " ".join(result.stdout.split())
    assert "--postprocess [perfetto|json|html|all|none] Artifacts to write per process" in text
    assert "--timeout SECONDS Kill a job's whole process tree" in text


def test_help_names_every_command_in_its_summary_and_its_list(tmp_path):
    from iket_cli.cli import COMMANDS

    result = run_iket("--help", cwd=tmp_path)
    assert result.code == 0, result
    summary, listing = result.stdout.split("Commands:")
    for name in COMMANDS:
        assert f"iket {name} " in summary, f"{name} missing from the usage summary"
        assert f"  {name} " in listing, f"{name} missing from the command list"


def test_the_terminal_timeline_draws_warps_of_a_warp_trace(tmp_path):
    result = run_iket("show", FIXTURES / "warp_multi", "--timeline", "--width", "60", cwd=tmp_path)
    assert result.code == 0, result
    no_mangled(result.stdout)
    assert "at::native::distribution_elementwise_grid_stride_kernel<…>" in result.stdout
    assert "━" * 20 in result.stdout and "warp alive (this launch recorded no event)" in result.stdout
