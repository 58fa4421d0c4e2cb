"""Loading a trace and computing the default summary: iket's model against json.load.

Side by side in one run, ``--runs`` times each, interleaved, each in a fresh process:

* ``json.load``: ``json.load`` of the trace, then a plain Python loop computing the same
  per-kernel, per-range and per-mark summary (durations, percentiles, mark offsets);
* ``iket``: ``iket_cli.model.trace.load`` plus ``iket_cli.analysis.summary.summarize``.

The trace defaults to keep256 (decoded from ``tests/fixtures/keep256_raw.tar.xz`` on the
first run into ``--cache``). Prints wall time and peak RSS medians and their ratios, then
the time of ``iket diff`` of the trace against itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure, ratio_table  # noqa: E402

PLAIN = r"""
import json, sys, math
from bisect import bisect_right
from collections import defaultdict
doc = json.load(open(sys.argv[1]))
def pct(v, q):
    v = sorted(v); return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]
per_kernel = defaultdict(lambda: (defaultdict(list), defaultdict(list)))
for launch in doc["launches"]:
    durations, offsets = per_kernel[launch["kernelName"]]
    spans = defaultdict(list)
    for r in launch["ranges"]:
        durations[r["rangeNameIdx"]].append(r["endTs"] - r["startTs"])
        spans[r["warpLocIdxs"][0]].append((r["startTs"], r["endTs"]))
    for s in spans.values():
        s.sort()
    starts = {k: [a for a, _ in s] for k, s in spans.items()}
    for m in launch["markers"]:
        s = spans.get(m["locIdx"], [])
        i = bisect_right(starts.get(m["locIdx"], []), m["timestamp"]) - 1
        while i >= 0 and s[i][1] < m["timestamp"]:
            i -= 1
        if i >= 0:
            offsets[m["markerNameIdx"]].append(m["timestamp"] - s[i][0])
for kernel, (durations, offsets) in per_kernel.items():
    for idx, v in durations.items():
        print(kernel, doc["stringTable"][idx], len(v), sum(v), pct(v, .5), pct(v, .9), pct(v, .99))
    for idx, v in offsets.items():
        print(kernel, doc["stringTable"][idx], len(v), pct(v, .5), pct(v, .9))
"""

IKET = r"""
import sys
from iket_cli.analysis import summary
from iket_cli.model import trace
for k in summary.summarize(trace.load(sys.argv[1])):
    for r in k.ranges:
        d = r.durations
        print(k.kernel, r.name, d.count, d.total, d.p50, d.p90, d.p99)
    for m in k.markers:
        o = m.offset_from_range
        print(k.kernel, m.name, o.count, o.p50, o.p90)
"""


def keep256(cache: Path) -> Path:
    out = cache / "keep256.trace.json"
    if not out.exists():
        sys.path.insert(0, str(ROOT))
        from iket_cli.decode import decoder

        with tarfile.open(ROOT / "tests/fixtures/keep256_raw.tar.xz") as archive:
            archive.extractall(cache, filter="data")
        raw = next(cache.rglob("iket.data.json"))
        exporter = decoder.decoder_class()(str(raw))
        out.write_text(exporter.export_decoded_json())
        exporter.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "iket-bench-trace")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    path = args.trace or keep256(args.cache)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    results: dict[str, list[tuple[float, int]]] = {"json.load": [], "iket": []}
    outputs = {}
    for run in range(args.runs):
        order = [("json.load", PLAIN), ("iket", IKET)]
        for name, code in order if run % 2 == 0 else order[::-1]:
            seconds, peak, out = measure([sys.executable, "-c", code, str(path)], env, capture=True)
            results[name].append((seconds, peak))
            outputs[name] = sorted(out.splitlines())
    if outputs["json.load"] != outputs["iket"]:
        raise SystemExit("the two summaries differ:\n" + "\n".join(outputs["json.load"][:5]))
    print(f"trace: {path} ({path.stat().st_size / 1e6:.0f} MB); summaries identical")
    ratio_table(results, "json.load", "load + summary")
    diffs = [
        measure([sys.executable, "-m", "iket_cli", "diff", str(path), str(path), "--format", "json"], env)[:2]
        for _ in range(args.runs)
    ]
    print(
        f"\niket diff of the trace against itself: median {statistics.median(s for s, _ in diffs):.2f} s, "
        f"peak RSS {statistics.median(m for _, m in diffs) / 1e6:.0f} MB "
        f"(runs {', '.join(f'{s:.2f}' for s, _ in diffs)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
