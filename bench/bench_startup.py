"""``iket --help`` start-up against its floor, ``python -c "import click"`` (goal: ≤ 0.1 s).

Both commands alternate in one run (A B A B ...), so a machine that drifts moves both; the
ratio is taken pair by pair. Optionally a third command, the same ``--help`` from another
checkout (``--old DIR``), gives the change's own ratio.

    PYTHONPATH=$PWD python3 bench/bench_startup.py --runs 30 [--old /path/to/old/checkout]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def once(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--old", type=Path, help="another checkout whose `iket --help` to compare")
    args = parser.parse_args()
    help_cmd = [sys.executable, "-m", "iket_cli", "--help"]  # -m: the checkout in cwd comes first
    variants = {
        "iket --help": (help_cmd, ROOT),
        "import click": ([sys.executable, "-c", "import click"], ROOT),
    }
    if args.old:
        variants["old iket --help"] = (help_cmd, args.old)
    os.environ.pop("PYTHONPATH", None)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.runs + 1):  # the first round warms the caches and is dropped
        for name, (cmd, cwd) in variants.items():
            times[name].append(once(cmd, cwd))
    times = {name: t[1:] for name, t in times.items()}
    ours = times["iket --help"]
    print(f"{'command':<18} {'median s':>9} {'max s':>7} {'iket/this':>10}")
    for name, t in times.items():
        ratio = statistics.median(a / b for a, b in zip(ours, t, strict=True))
        print(f"{name:<18} {statistics.median(t):9.3f} {max(t):7.3f} {ratio:10.3f}")


if __name__ == "__main__":
    main()
