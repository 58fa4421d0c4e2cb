"""The columnar trace model and the default summary, on the real H200 traces."""

from __future__ import annotations

import json

import pytest

from iket_cli.analysis import summary
from iket_cli.errors import ManifestError, UsageError
from iket_cli.model import trace
from iket_cli.model.reading import open_capture

from conftest import FIXTURES, run_iket

TRACES = {
    "affine": FIXTURES / "affine" / "iket_pid_0x204.trace.json",
    "multi": FIXTURES / "multi" / "iket_pid_0x23f.trace.json",
    "spawn": FIXTURES / "spawn" / "iket_pid_0x2b5.trace.json",
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_scan_equals_a_full_parse(name, tmp_path):
    fast = trace.load(TRACES[name])
    plain = trace._from_json(TRACES[name])
    assert fast.launches == plain.launches
    assert (fast.strings, fast.locations) == (plain.strings, plain.locations)
    doc = json.loads(TRACES[name].read_text())
    assert [len(launch.ranges) for launch in fast.launches] == [len(x["ranges"]) for x in doc["launches"]]
    pretty = tmp_path / "pretty.trace.json"
    pretty.write_text(json.dumps(doc, indent=1))
    assert trace.load(pretty).launches == fast.launches, "other layouts take the general path"


def test_exact_numbers_affine():
    (kernel,) = summary.summarize(trace.load(TRACES["affine"]))
    assert (kernel.kernel, kernel.launches, kernel.grid, kernel.block) == (
        "profiled_affine_kernel",
        1,
        (1, 1, 1),
        (32, 1, 1),
    )
    (row,) = kernel.ranges
    assert (row.name, row.durations.count, row.durations.total) == ("affine", 1, 224)
    (mark,) = kernel.markers
    assert (mark.name, mark.count, mark.offset_from_range.p50) == ("loaded", 1, 64)


def test_exact_numbers_multi():
    scale, copy = summary.summarize(trace.load(TRACES["multi"]))
    assert (scale.kernel, scale.launches, scale.grid, scale.block) == (
        "scale_loop_kernel",
        3,
        (4, 1, 1),
        (128, 1, 1),
    )
    (step,) = scale.ranges
    assert step.name == "step" and step.durations.count == 3 * 64
    assert step.durations.min == 0 and step.durations.at_resolution_limit
    (stepped,) = scale.markers
    assert stepped.count == 192 and stepped.offset_from_range.count == 192, "every mark inside a step"
    assert (copy.kernel, copy.launches, copy.ranges[0].durations.count) == ("copy_kernel_kernel", 1, 16)
    assert copy.markers == []


def test_stats_against_a_plain_reference():
    values = [5, 1, 9, 3, 7, 2, 8, 6, 4, 10]
    result = summary.stats(values)
    ordered = sorted(values)
    assert (result.count, result.total, result.min, result.max) == (10, 55, 1, 10)
    assert (result.p50, result.p90, result.p99) == (ordered[4], ordered[8], ordered[9])
    assert summary.stats([]) is None


def test_errors_are_one_line(tmp_path):
    with pytest.raises(ManifestError, match="does not exist"):
        trace.load(tmp_path / "missing.trace.json")
    (tmp_path / "empty.trace.json").write_text("")
    with pytest.raises(ManifestError, match="is empty"):
        trace.load(tmp_path / "empty.trace.json")
    (tmp_path / "bad.trace.json").write_text('{"graphLaunches":{},"launches":[')
    with pytest.raises(ManifestError, match="is not an IKET trace"):
        trace.load(tmp_path / "bad.trace.json")


def test_cli_show(tmp_path):
    table = run_iket("show", FIXTURES / "multi", cwd=tmp_path)
    assert table.code == 0, table
    assert "scale_loop_kernel" in table.stdout and "mark stepped" in table.stdout
    as_json = run_iket("show", FIXTURES / "spawn", "--format", "json", cwd=tmp_path)
    data = json.loads(as_json.stdout)
    assert [p["process"] for p in data["processes"]] == ["0x299", "0x2b5"]
    (tmp_path / "bad.trace.json").write_text("{")
    bad = run_iket("show", tmp_path / "bad.trace.json", cwd=tmp_path)
    assert bad.code == 2 and "is not an IKET trace" in bad.stderr and "Traceback" not in bad.stderr
    (tmp_path / "cap").mkdir()
    none = run_iket("show", tmp_path / "cap", cwd=tmp_path)
    assert none.code == 2 and "holds no JSON trace" in none.stderr


def test_filters_and_grouping():
    multi = FIXTURES / "multi"
    (only,) = summary.summarize_capture(open_capture(multi, kernel="scale*"))
    assert [k.kernel for k in only["kernels"]] == ["scale_loop_kernel"]
    by_launch = summary.summarize_capture(open_capture(multi, kernel="scale"), by="launch")
    assert [p["group"] for p in by_launch] == ["launch 0", "launch 1", "launch 2"]
    assert all(p["kernels"][0].ranges[0].durations.count == 64 for p in by_launch)
    (second,) = summary.summarize_capture(open_capture(multi, launch=1))
    assert second["kernels"][0].launches == 1
    (cta,) = summary.summarize_capture(open_capture(multi, cta=(1, 0, 0)))
    step = cta["kernels"][0].ranges[0]
    assert step.durations.count == 3 * 16, "one CTA of four: 4 warps x 4 steps per launch"
    by_warp = summary.summarize_capture(open_capture(multi, kernel="copy"), by="warp")
    assert len(by_warp) == 8 and all(p["kernels"][0].ranges[0].durations.count == 2 for p in by_warp)
    with pytest.raises(UsageError, match="no range named 'nope'"):  # its marks alone are not a table
        summary.summarize_capture(open_capture(multi, range_name="nope"))


def test_show_formats(tmp_path):
    csv_out = run_iket("show", FIXTURES / "affine", "--format", "csv", cwd=tmp_path)
    lines = csv_out.stdout.splitlines()
    assert lines[0].startswith("process,group,kernel,symbol,kind,name,range_type,count,total_ns")
    expected = (
        "0x204,,profiled_affine_kernel,profiled_affine_kernel,range,affine,push/pop,1,224,224.0,224,224"
    )
    assert lines[1].startswith(expected)
    markdown = run_iket("show", FIXTURES / "affine", "--format", "markdown", cwd=tmp_path)
    assert "| 0x204 | profiled_affine_kernel | mark | loaded | 1 |  | 64 ns |" in markdown.stdout
    # a kernel name is text in a rendered table, not an HTML tag (GitHub drops <cutlass_80_...>)
    assert "| at::native::reduce_kernel&lt;…&gt; | uninstrumented |" in markdown.stdout
    bad = run_iket("show", FIXTURES / "affine", "--cta", "1,0", cwd=tmp_path)
    assert bad.code == 2 and "is not X,Y,Z" in bad.stderr


def test_unknown_schema_version_is_refused(tmp_path):
    doc = json.loads(TRACES["affine"].read_text())
    doc["meta"]["version"] = 2
    for name, text in (
        ("compact", json.dumps(doc, separators=(",", ":"), sort_keys=True)),
        ("pretty", json.dumps(doc, indent=1)),
    ):
        path = tmp_path / f"{name}.trace.json"
        path.write_text(text)
        with pytest.raises(ManifestError, match="schema version 2; iket reads version 1"):
            trace.load(path)


def test_timeline(tmp_path):
    drawn = run_iket(
        "show", FIXTURES / "multi", "--timeline", "--cta", "0,0,0", "--width", "60", cwd=tmp_path
    )
    assert drawn.code == 0, drawn
    rows = [line for line in drawn.stdout.splitlines() if line.startswith("cta 0,0,0 w")]
    assert len(rows) == 4, "block of 128 threads: 4 warps in the CTA"
    assert all("s" in row and "│" in row for row in rows), "step bars and stepped ticks"
    assert "ranges: step" in drawn.stdout and "384 ns" in drawn.stdout
    many = run_iket("show", FIXTURES / "multi", "--timeline", "--launch", "3", cwd=tmp_path)
    assert many.code == 0 and many.stdout.count("copy_kernel_kernel") == 1
    out_of_range = run_iket("show", FIXTURES / "multi", "--timeline", "--launch", "9", cwd=tmp_path)
    assert out_of_range.code == 2 and "no launch matches the filters" in out_of_range.stderr


def test_the_trace_readers_agree_on_graph_launches_and_single_clusters():
    """The scan and the general JSON path read the same launches, graph replays last."""
    for name in ("loss_graph", "multi", "affine", "loss_multi"):
        path = next((FIXTURES / name).glob("*.trace.json"))
        scanned, general = trace._scan(path, path.read_bytes()), trace._from_json(path)
        assert [_shape(x) for x in scanned.launches] == [_shape(x) for x in general.launches], name
    graph = trace.load(next((FIXTURES / "loss_graph").glob("*.trace.json")))
    assert [x.graph for x in graph.launches] == [
        None,
        None,
        "graph_exec_2:0",
        "graph_exec_2:1",
        "graph_exec_2:2",
    ]


def _shape(x: trace.Launch) -> tuple:
    return (
        x.kernel,
        x.graph,
        x.single_cluster,
        list(x.ranges.start),
        list(x.markers.start),
        list(x.warps.end),
    )


@pytest.mark.parametrize(("flag", "single"), [("1", True), ("true", True), ("0", False), ("{}", False),
                                              ("[]", False), ('"1"', False), ("null", False)])  # fmt: skip
def test_only_a_flag_of_one_is_a_single_cluster_in_both_readers(tmp_path, flag, single):
    """A damaged ``singleClusterActive`` (``{}``) read as one cluster by the scan and as none by
    the JSON path hid a launch's missing warps from the one and not the other."""
    text = (FIXTURES / "affine" / "iket_pid_0x204.trace.json").read_text()
    path = tmp_path / "iket_pid_0x1.trace.json"
    path.write_text(text.replace('"singleClusterActive":0', f'"singleClusterActive":{flag}'))
    general = trace._from_json(path)
    assert [x.single_cluster for x in general.launches] == [single]
    try:
        scanned = trace._scan(path, path.read_bytes())
    except ValueError:  # not the decoder's layout: trace.load reads it by the JSON path
        scanned = trace.load(path)
    assert [x.single_cluster for x in scanned.launches] == [single]
