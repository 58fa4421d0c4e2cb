"""The report in a real headless Chromium (Debian's ``chromium``, driven by Playwright), with
the network cut: it must work from ``file://`` alone.

Skipped where Chromium or Playwright is missing; ``.ci/run`` installs both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from iket_cli.model import atomic
from iket_cli.model.reading import open_capture
from iket_cli.render import report

from conftest import FIXTURES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium)")
# Flags for a closed network (see the machine notes): no background fetches at start-up.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


class Page:
    """A report opened offline, with every console error and every request recorded."""

    def __init__(self, browser, path: Path) -> None:
        self.context = browser.new_context(offline=True, viewport={"width": 1400, "height": 1000})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']", timeout=15000)

    def bars(self, panel: int = 0) -> int:
        return self.page.evaluate(f"window.iketReport.panels[{panel}].drawn")

    def close(self) -> None:
        self.context.close()


def test_affine_report_offline_with_hover(browser, tmp_path):
    page = Page(browser, report.write(FIXTURES / "affine", tmp_path / "affine.html"))
    try:
        assert page.bars() == 1, "one affine range"
        where = page.page.evaluate("window.iketReport.panels[0].locate('affine')")
        page.page.mouse.move(where["x"], where["y"])
        tip = page.page.locator("#tip")
        tip.wait_for(state="visible", timeout=5000)
        text = tip.inner_text()
        assert "affine" in text and "duration 224 ns" in text and "warp 0" in text
        headers = page.page.locator("#stats table.ranges th")
        assert headers.count() == 12
        assert page.page.locator("#stats table.untraced tbody tr").count() == 12, "PyTorch's kernels"
        page.page.screenshot(path=str(tmp_path / "affine.png"), full_page=True)
        assert (tmp_path / "affine.png").stat().st_size > 10_000
        assert page.errors == []
        assert all(url.startswith("file://") for url in page.requests), page.requests
    finally:
        page.close()


def test_multi_report_every_launch_and_sorting(browser, tmp_path):
    page = Page(browser, report.write(FIXTURES / "multi", tmp_path / "multi.html"))
    try:
        counts = []
        for option in range(4):
            page.page.select_option("select[aria-label=launch]", str(option))
            counts.append(page.bars())
        assert counts == [64, 64, 64, 16]
        first_cells = page.page.locator("#stats table.ranges tbody tr td:first-child")
        count_header = page.page.locator("#stats table.ranges th", has_text="count")
        count_header.click()  # sort by count, largest first
        counts_column = page.page.locator("#stats table.ranges tbody tr td:nth-child(4)").all_inner_texts()
        assert counts_column == ["192", "192", "16"]
        assert first_cells.count() == 3
        box = page.page.locator(".timeline canvas").bounding_box()
        page.page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] / 2)
        before = page.bars()
        page.page.mouse.wheel(0, -1500)  # zoom in at the left edge of the kernel: fewer bars in view
        page.page.wait_for_function(f"window.iketReport.panels[0].drawn < {before}", timeout=5000)
        assert page.errors == []
    finally:
        page.close()


def test_diff_report_has_two_timelines(browser, tmp_path):
    from iket_cli.analysis import diff

    base, new = open_capture(FIXTURES / "affine"), open_capture(FIXTURES / "spawn")
    changes = [c.__dict__ for c in diff.compare(base, new)]
    path = atomic.write(
        tmp_path / "d.html",
        report.build_diff(base, new, changes, "median"),
    )
    page = Page(browser, path)
    try:
        assert (page.bars(0), page.bars(1)) == (1, 1)
        assert "affine" in page.page.locator("table.stats").first.inner_text()
        assert page.errors == []
    finally:
        page.close()


def most_overlapping_tokens(folder: Path) -> int:
    """The most token ranges of one warp that are open at one instant: the lanes they need."""
    doc = json.loads(next(folder.glob("*.trace.json")).read_text())
    most = 0
    for launch in doc["launches"]:
        per_warp: dict = {}
        for r in launch["ranges"]:
            if r["rangeType"] == 1:
                per_warp.setdefault(tuple(r["warpLocIdxs"]), []).append((r["startTs"], r["endTs"]))
        for spans in per_warp.values():
            edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])  # ends first
            open_now = 0
            for _, step in edges:
                open_now += step
                most = max(most, open_now)
    return most


def test_cute_pipeline_report_draws_lanes_roles_payloads_and_arrows(browser, tmp_path):
    """The H200 capture of examples/cute_pipeline.py: token ranges on lanes of their own, rows
    labelled by warp role, the DAG's load -> reduce arrows, payloads on hover."""
    page = Page(browser, report.write(FIXTURES / "cute_pipeline", tmp_path / "cute.html"))
    try:
        panel = "window.iketReport.panels[0]"
        assert page.page.evaluate(f"[...{panel}.l.tokenNames].length") == 3, "load, tile, wait: token ranges"
        assert page.page.evaluate(f"{panel}.l.lanes") == most_overlapping_tokens(FIXTURES / "cute_pipeline")
        assert int(page.page.evaluate(f"{panel}.canvas.dataset.arrows")) > 0, "arrows drawn"
        assert (
            "1,024 arrows: load → reduce (smem[stage] via mbarrier)"
            in page.page.locator(".legend").inner_text()
        )
        where = page.page.evaluate(f"{panel}.locate('load')")
        page.page.mouse.move(where["x"], where["y"])
        tip = page.page.locator("#tip")
        tip.wait_for(state="visible", timeout=5000)
        text = tip.inner_text()
        assert "load (range_start/range_end)" in text and "payload (i32): 0" in text and "(Producer)" in text
        page.page.evaluate(f"{panel}.start = 0; {panel}.end = 30000; {panel}.draw()")  # the first tiles
        page.page.screenshot(path=str(tmp_path / "cute.png"), full_page=False)
        keep = Path(__file__).resolve().parents[2] / "docs" / "report_cute.png"
        if keep.parent.is_dir() and __import__("os").environ.get("IKET_KEEP_SCREENSHOT"):
            shutil.copy(tmp_path / "cute.png", keep)
        assert page.errors == []
        assert all(url.startswith("file://") for url in page.requests), page.requests
    finally:
        page.close()


def test_warp_trace_report_draws_warps_and_sm_occupancy(browser, tmp_path, torch_warp):
    page = Page(browser, report.write(torch_warp, tmp_path / "torch.html"))
    try:
        labels = page.page.locator("select option").all_inner_texts()
        assert len(labels) == 27 and not any("_Z" in label for label in labels)
        assert any("cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>" in x for x in labels)
        occupancy = page.page.locator("canvas.occupancy")
        assert occupancy.is_visible() and occupancy.bounding_box()["height"] >= 100, "a row per SM"
        assert "SM occupancy" in page.page.locator("#timeline").inner_text()
        where = page.page.evaluate(
            """() => { const p = window.iketReport.panels[0], l = p.l, r = p.canvas.getBoundingClientRect();
                 const x = (p.x(l.w[1]) + p.x(l.w[2])) / 2, y = p.rowY(l.w[0]) + p.rowH / 2;
                 return { x: r.left + x, y: r.top + y }; }"""
        )
        page.page.mouse.move(where["x"], where["y"])
        tip = page.page.locator("#tip")
        tip.wait_for(state="visible", timeout=5000)
        assert "warp lifetime" in tip.inner_text() and "SM " in tip.inner_text()
        stats = page.page.locator("#stats").inner_text()
        assert "span p50" in stats and "_Z" not in stats
        page.page.screenshot(path=str(tmp_path / "torch.png"), full_page=False)
        assert page.errors == []
        assert all(url.startswith("file://") for url in page.requests), page.requests
    finally:
        page.close()


def test_a_comment_opener_in_a_name_or_title_keeps_the_page(browser, tmp_path):
    """D5: ``<!--<script`` in a name and in the title turned the rest of the page's script into
    a comment: the report opened blank. It draws, and shows the names as they are."""
    folder = tmp_path / "cap"
    shutil.copytree(FIXTURES / "affine", folder)
    trace_path = folder / "iket_pid_0x204.trace.json"
    trace = json.loads(trace_path.read_text())
    hostile = "<!--<script>&\u2028"
    trace["stringTable"][0] = hostile
    trace_path.write_text(json.dumps(trace))
    out = report.write(folder, tmp_path / "r.html", title="<!--<script t")
    assert "<!--" not in out.read_text().split('<script id="iket-data"')[1]
    page = Page(browser, out)
    try:
        assert page.bars() == 1
        assert page.page.title() == "<!--<script t"
        assert hostile.strip("\u2028") in page.page.locator("#stats").inner_text()
        assert page.errors == []
    finally:
        page.close()


def test_the_pipeline_panel_says_what_show_pipeline_says_and_edges_filter_the_arrows(browser, tmp_path):
    """Issue 33, item 3: the report's pipeline panel (the sentence, a busy/waiting/idle bar per
    stage) agrees with ``iket show --pipeline``; unchecking an edge hides its arrows."""
    import json

    from conftest import run_iket

    shown = run_iket("show", FIXTURES / "cute_pipeline", "--pipeline", "--format", "json", cwd=tmp_path)
    (kernel,) = json.loads(shown.stdout)["processes"][0]["kernels"]
    page = Page(browser, report.write(FIXTURES / "cute_pipeline", tmp_path / "cute.html"))
    try:
        section = page.page.locator("#pipeline")
        assert kernel["sentence"] in section.inner_text()
        assert page.page.locator("#pipeline .stagebar").count() == len(kernel["stages"])
        width = page.page.evaluate("document.querySelector('#pipeline .stagebar .busy').style.width")
        assert float(width.rstrip("%")) == pytest.approx(100 * kernel["stages"][0]["busy"])
        panel = "window.iketReport.panels[0]"
        assert int(page.page.evaluate(f"{panel}.canvas.dataset.arrows")) > 0
        page.page.locator("input.edge").first.uncheck()
        assert int(page.page.evaluate(f"{panel}.canvas.dataset.arrows")) == 0, "the edge's arrows hidden"
        page.page.locator("input.edge").first.check()
        assert int(page.page.evaluate(f"{panel}.canvas.dataset.arrows")) > 0
        assert page.errors == []
    finally:
        page.close()


#: Records every text the report writes on its canvases (the time axis, the occupancy label).
CANVAS_TEXTS = (
    "window.__texts = []; const fill = CanvasRenderingContext2D.prototype.fillText;"
    "CanvasRenderingContext2D.prototype.fillText = function (t, ...a) {"
    " window.__texts.push(String(t)); return fill.call(this, t, ...a); };"
)


def test_the_axis_ticks_are_round_and_one_sms_occupancy_is_labelled_whole(browser, tmp_path, torch_warp):
    """Ticks read ``50.00 µs`` and a one-SM occupancy canvas was two pixels high (its label
    clipped), its note without a unit."""
    for capture, name in ((torch_warp, "torch"), (FIXTURES / "affine", "affine")):
        context = browser.new_context(offline=True, viewport={"width": 1400, "height": 1000})
        try:
            page = context.new_page()
            page.add_init_script(CANVAS_TEXTS)
            page.goto(report.write(capture, tmp_path / f"{name}.html").resolve().as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=15000)
            texts = page.evaluate("window.__texts")
            ticks = [t for t in texts if t.endswith((" ns", " µs", " ms", " s"))]
            assert ticks and not any(".00 " in t for t in ticks), ticks
            if name == "torch":
                assert any(t.endswith(" µs") for t in ticks), ticks
                continue
            assert "SM occupancy (1 SM)" in texts
            assert page.locator("canvas.occupancy").bounding_box()["height"] >= 12
            assert "warps on one SM" in page.locator("#timeline").inner_text()
        finally:
            context.close()
