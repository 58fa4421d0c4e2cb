"""How often the diff gate cries wolf, and how often it catches a slower kernel.

    python bench/bench_gate.py --unchanged base1 base2 base3 --slower slower --json gate.json

``--unchanged``: repeated captures (``iket profile --repeat N``) of one unchanged workload;
``--slower``: one of the workload made slower. For each threshold:

* the rank test on the repeats (``analysis.gate``, what ``iket diff`` applies to repeated
  captures): the unchanged repeats pooled and split at random into BASE and NEW of n repeats
  each (n = 3 and 5; ``--splits`` splits): the share of splits that flag a range is its
  false-alarm rate; NEW drawn from the slower capture's repeats instead gives the share
  that catches it;
* the single-capture rule (instances' own spread, what ``iket diff`` applies to two captures
  made once): every ordered pair of single unchanged repeats, and every (unchanged, slower)
  pair of single repeats.

Prints a markdown table per range and, with ``--json``, every figure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from iket_cli.analysis import diff, gate  # noqa: E402  (the checkout's, wherever this runs)
from iket_cli.model import manifest  # noqa: E402
from iket_cli.model.reading import open_capture  # noqa: E402


def singles(location: Path) -> list[dict]:
    """Each counted repeat's instances, by (kernel, range)."""
    record, found = manifest.read(location), diff.by_repeat(open_capture(location))  # each trace read once
    return [found[r["index"]] for r in record["repeats"] if r["status"] == "ok"]


def figures(unchanged: list[Path], slower: Path, thresholds: list[float], splits: int) -> dict:
    per = [diff.per_repeat(open_capture(p), "median") for p in unchanged]
    pooled = {key: [v for values in per for v in values[key]] for key in per[0]}
    changed = diff.per_repeat(open_capture(slower), "median")
    quiet = [s for p in unchanged for s in singles(p)]
    loud = singles(slower)
    rng = random.Random(18)
    result: dict = {"repeats": len(quiet), "slower_repeats": len(loud), "by_threshold": {}}
    for limit in thresholds:
        row: dict = {}
        for key, values in pooled.items():
            name = key[1]
            entry = row.setdefault(name, {})
            for n in (3, 5):
                if 2 * n > len(values) or n > len(changed[key]):
                    continue
                alarms = sum(
                    gate.judge(d[:n], d[n:], limit)[0] == "slower"
                    for d in (rng.sample(values, 2 * n) for _ in range(splits))
                )
                caught = sum(
                    gate.judge(rng.sample(values, n), rng.sample(changed[key], n), limit)[0] == "slower"
                    for _ in range(splits)
                )
                entry[f"rank {n}v{n} false alarms"] = alarms / splits
                entry[f"rank {n}v{n} caught"] = caught / splits
            rules = [("*", limit)]
            pairs = list(itertools.permutations(quiet, 2))
            entry["single false alarms"] = sum(
                diff._change(key, a[key], b[key], "median", rules).regression for a, b in pairs
            ) / len(pairs)
            mixed = [(a, b) for a in quiet for b in loud]
            entry["single caught"] = sum(
                diff._change(key, a[key], b[key], "median", rules).regression for a, b in mixed
            ) / len(mixed)
        result["by_threshold"][f"{limit:.1%}"] = row
    result["per_repeat_medians_ns"] = {k[1]: v for k, v in pooled.items()}
    result["slower_per_repeat_medians_ns"] = {k[1]: v for k, v in changed.items()}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unchanged", type=Path, nargs="+", required=True)
    parser.add_argument("--slower", type=Path, required=True)
    parser.add_argument("--thresholds", default="0,0.005,0.02,0.05", help="fractions, comma-separated")
    parser.add_argument("--splits", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    thresholds = [float(t) for t in args.thresholds.split(",")]
    result = figures(args.unchanged, args.slower, thresholds, args.splits)
    columns = [c for row in result["by_threshold"].values() for entry in row.values() for c in entry]
    columns = list(dict.fromkeys(columns))
    print(f"{result['repeats']} unchanged repeats, {result['slower_repeats']} slower ones\n")
    print("| threshold | range | " + " | ".join(columns) + " |")
    print("| --- | --- |" + " --- |" * len(columns))
    for limit, row in result["by_threshold"].items():
        for name, entry in row.items():
            cells = ["-" if c not in entry else f"{entry[c]:.3f}" for c in columns]
            print(f"| {limit} | {name} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
