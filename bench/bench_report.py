"""The offline report on keep256: build time, file size, and first render in headless Chromium.

Goals (issue 6): the file ≤ 10 MB and the first render ≤ 3 s on the 2-core machine. The
anchor is loading the same trace into iket's model and summarising it (what ``iket show``
does), in the same run: the report's build time is shown as a ratio of that.

    python bench/bench_report.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _measure import measure  # noqa: E402
from bench_trace import keep256  # noqa: E402


def first_render(page: Path, runs: int) -> list[float]:
    """Seconds from navigation start to the page saying it is ready, one fresh tab per run."""
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "tests" / "render"))
    from test_report_browser import FLAGS

    chromium = shutil.which("chromium")
    found = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
        for _ in range(runs):
            context = browser.new_context(offline=True, viewport={"width": 1400, "height": 1000})
            tab = context.new_page()
            tab.goto(page.as_uri(), timeout=60000)
            tab.wait_for_selector("body[data-ready='1']", timeout=60000)
            found.append(tab.evaluate("performance.now()") / 1000)
            context.close()
        browser.close()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "iket-bench-trace")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    trace = keep256(args.cache)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    page = args.cache / "keep256.report.html"
    build, show = [], []
    for _ in range(args.runs):
        show.append(measure([sys.executable, "-m", "iket_cli", "show", str(trace), "--format", "json"], env))
        build.append(measure([sys.executable, "-m", "iket_cli", "report", str(trace), "-o", str(page)], env))
    renders = first_render(page, args.runs)
    b, s = statistics.median(t for t, *_ in build), statistics.median(t for t, *_ in show)
    print("| step | runs (s) | median (s) | ratio | peak RSS (MB) |")
    print("| --- | --- | --- | --- | --- |")
    for name, runs in (("iket show --format json (anchor)", show), ("iket report", build)):
        times = ", ".join(f"{t:.2f}" for t, *_ in runs)
        median = statistics.median(t for t, *_ in runs)
        rss = statistics.median(m for _, m, *_ in runs) / 1e6
        print(f"| {name} | {times} | {median:.2f} | {median / s:.2f}x | {rss:.0f} |")
    print(f"\nreport size: {page.stat().st_size / 1e6:.1f} MB (goal ≤ 10 MB); build {b:.2f} s")
    shown = ", ".join(f"{r:.2f}" for r in renders)
    middle = statistics.median(renders)
    print(f"first render in headless Chromium: {shown} s, median {middle:.2f} s (goal ≤ 3 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
