"""``iket postprocess`` against ``run-iket postprocess`` on the keep256 raw capture.

Both decode the same raw capture (``tests/fixtures/keep256_raw.tar.xz``, or ``--raw``:
811k ranges and 811k markers) into fresh copies, interleaved, ``--runs`` times per format.
Wall time and peak memory (the summed RSS of the whole process tree, sampled every 20 ms)
are reported as medians, with iket's ratio to run-iket. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure  # noqa: E402

from iket_cli.system import toolchain  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, default=ROOT / "tests" / "fixtures" / "keep256_raw.tar.xz")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--formats", default="all,perfetto,html")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-bench-pp-"))
    with tarfile.open(args.raw) as archive:
        archive.extractall(work / "src", filter="data")
    source = next((work / "src").rglob("iket")).parent
    tool = toolchain.find()
    env = tool.child_env(dict(os.environ))
    results: dict[str, dict[str, list]] = {}
    for fmt in args.formats.split(","):
        for run in range(args.runs):
            pair = [
                ("run-iket", [tool.path, "postprocess"]),
                ("iket", [sys.executable, "-m", "iket_cli", "postprocess", "-q"]),
            ]
            for name, cmd in pair if run % 2 == 0 else pair[::-1]:
                target = work / f"{name}-{fmt}"
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(source, target)
                seconds, peak, _ = measure([*cmd, str(target), "--format", fmt], env)
                entry = results.setdefault(f"{fmt}/{name}", {"s": [], "rss": []})
                entry["s"].append(seconds)
                entry["rss"].append(peak)
                shutil.rmtree(target)
    print("| format | tool | runs (s) | median (s) | ratio | peak RSS (MB, median) | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for fmt in args.formats.split(","):
        base = results[f"{fmt}/run-iket"]
        for name in ("run-iket", "iket"):
            entry = results[f"{fmt}/{name}"]
            med, rss = statistics.median(entry["s"]), statistics.median(entry["rss"])
            print(
                f"| {fmt} | {name} | {', '.join(f'{v:.2f}' for v in entry['s'])} | {med:.2f} | "
                f"{med / statistics.median(base['s']):.2f}x | {rss / 1e6:.0f} | "
                f"{rss / statistics.median(base['rss']):.2f}x |"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
