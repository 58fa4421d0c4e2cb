"""The offline HTML report: the data it embeds (here), and the page in a real browser
(tests/render/test_report_browser.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from iket_cli.render import report, report_data

from conftest import FIXTURES, run_iket


@pytest.mark.parametrize("name", ["affine", "multi", "spawn"])
def test_the_tables_are_iket_show_json(tmp_path, name):
    page = tmp_path / "r.html"
    result = run_iket("report", FIXTURES / name, "-o", page, cwd=tmp_path)
    assert result.code == 0, result
    shown = run_iket("show", FIXTURES / name, "--format", "json", cwd=tmp_path)
    assert report.embedded(page)["stats"] == json.loads(shown.stdout)["processes"]


def test_the_timeline_of_affine(tmp_path):
    page = report.write(FIXTURES / "affine", tmp_path / "a.html")
    data = report.embedded(page)
    (process,) = data["timelines"]
    (launch,) = process["launches"]
    assert launch["kernel"] == "profiled_affine_kernel"
    assert (launch["shown_ranges"], launch["shown_marks"]) == (1, 1)
    assert launch["names"] == ["affine", "loaded"]
    ranges, marks = _ints(launch["ranges"]), _ints(launch["marks"])
    row, name, start, duration = ranges
    assert (name, duration) == (0, 224), "the affine range: 224 ns"
    assert marks[2] - start == 64, "the loaded mark 64 ns after the range starts"
    assert launch["rows"][row][2] == 0, "warp 0"


def test_multi_has_four_launches_with_their_ranges(tmp_path):
    data = report.embedded(report.write(FIXTURES / "multi", tmp_path / "m.html"))
    launches = data["timelines"][0]["launches"]
    assert [(lc["kernel"], lc["shown_ranges"]) for lc in launches] == [
        ("scale_loop_kernel", 64),
        ("scale_loop_kernel", 64),
        ("scale_loop_kernel", 64),
        ("copy_kernel_kernel", 16),
    ]
    rows = launches[0]["rows"]
    assert rows == sorted(rows), "rows grouped by SM, then CTA, then warp"
    assert len(rows) == 16, "4 CTAs of 4 warps"


def test_a_big_launch_keeps_whole_warps_within_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(report_data, "EVENT_BUDGET", 4 * 40)  # 40 events per launch of multi
    data = report.embedded(report.write(FIXTURES / "multi", tmp_path / "m.html"))
    first = data["timelines"][0]["launches"][0]
    assert first["total_rows"] == 16 and len(first["rows"]) == 5, "8 events per warp: 5 warps fit in 40"
    assert (first["shown_ranges"], first["shown_marks"]) == (20, 20)
    assert (first["total_ranges"], first["total_marks"]) == (64, 64)


def test_the_report_carries_the_manifest_and_a_small_perfetto_trace(tmp_path, double):
    (tmp_path / "w.py").write_text("def workload():\n    pass\n")
    from conftest import replay

    result = run_iket(
        "profile", "--run-iket", double, "-o", "cap", "w.py:workload", cwd=tmp_path, env=replay("affine")
    )
    assert result.code == 0, result
    data = report.embedded(tmp_path / "cap" / "iket_pid_0x204.html")
    shown = run_iket("show", tmp_path / "cap", "--format", "json", cwd=tmp_path)
    (expected,) = json.loads(shown.stdout)["processes"]
    (embedded,) = data["stats"]
    assert embedded.pop("trace") == "iket_pid_0x204.trace.json", "relative: no staging folder leaks"
    assert Path(expected.pop("trace")).name == "iket_pid_0x204.trace.json"
    assert embedded == expected
    assert data["meta"]["command"].startswith("iket profile")
    assert data["meta"]["phases"]["capture"] > 0
    assert data["perfetto"]["name"] == "iket_pid_0x204.pftrace.gz" and data["perfetto"]["b64"]
    page = run_iket("report", tmp_path / "cap", cwd=tmp_path)
    assert page.code == 0 and (tmp_path / "cap" / "report.html").is_file()


def test_diff_html_is_side_by_side(tmp_path):
    page = tmp_path / "d.html"
    result = run_iket("diff", FIXTURES / "affine", FIXTURES / "spawn", "--html", page, cwd=tmp_path)
    assert result.code == 0, result
    data = report.embedded(page)
    assert data["kind"] == "diff" and len(data["sides"]) == 2
    (change,) = data["changes"]
    assert (change["kernel"], change["range"], change["base"], change["new"]) == (
        "profiled_affine_kernel",
        "affine",
        224,
        192,
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d.mkdir(), "holds no JSON trace"),
        (lambda d: (d.mkdir(), (d / "iket_pid_0x1.trace.json").write_text('{"x": [')), "json is not"),
    ],
    ids=["no traces", "corrupt trace"],
)
def test_bad_input_is_one_line(tmp_path, make, message):
    make(tmp_path / "cap")
    result = run_iket("report", tmp_path / "cap", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert result.code in (1, 2) and message in result.stderr, result
    assert "Traceback" not in result.stderr and not (tmp_path / "r.html").exists()


def test_a_script_cannot_end_the_data_block(tmp_path):
    folder = tmp_path / "cap"
    shutil.copytree(FIXTURES / "affine", folder)
    page = report.write(folder, tmp_path / "r.html", title="</script><b>x")
    text = page.read_text()
    assert text.count("</script>") == 2, "only the page's own two script blocks end"
    assert report.embedded(page)["title"] == "</script><b>x"


def test_a_comment_opener_cannot_hide_the_script(tmp_path):
    """D5: ``<!--<script`` in a name or the title put the page's script in a comment (HTML's
    script data escape), so the report opened blank: no ``<``, ``>`` or ``&`` is left raw in the
    data block, and the data reads back as it was."""
    folder = tmp_path / "cap"
    shutil.copytree(FIXTURES / "affine", folder)
    trace_path = folder / "iket_pid_0x204.trace.json"
    trace = json.loads(trace_path.read_text())
    trace["stringTable"][0] = "<!--<script>&\u2028"
    trace_path.write_text(json.dumps(trace))
    page = report.write(folder, tmp_path / "r.html", title="<!--<script t")
    block = page.read_text().split('<script id="iket-data" type="application/json">')[1].split("</script>")[0]
    assert not set(block) & set("<>&\u2028\u2029"), "raw characters in the data block"
    data = report.embedded(page)
    assert data["title"] == "<!--<script t"
    assert "<!--<script>&\u2028" in json.dumps(data, ensure_ascii=False)


def _ints(b64: str) -> list[int]:
    import base64
    from array import array

    values = array("i")
    values.frombytes(base64.b64decode(b64))
    return values.tolist()


def test_ints_helper_reads_what_the_page_reads():
    assert _ints(report_data._b64(__import__("array").array("i", [1, -2, 3]))) == [1, -2, 3]


def test_an_output_in_a_missing_folder_is_one_line(tmp_path):
    result = run_iket("report", FIXTURES / "affine", "-o", tmp_path / "no" / "r.html", cwd=tmp_path)
    assert result.code == 2 and "is not a directory" in result.stderr and "Traceback" not in result.stderr
