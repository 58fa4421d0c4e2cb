"""``iket run --jobs auto`` against ``--jobs 1`` on a machine with several GPUs (issue 9).

Four capture jobs of the examples, both settings interleaved in one run, each into a fresh
output root. Goal: ``--jobs auto`` ≤ 0.6x the wall time of ``--jobs 1`` on two GPUs.

    PYTHONPATH=$PWD python3 bench/bench_jobs.py --runs 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = """output = "runs"
[[jobs]]
name = "affine0"
target = "profile_affine.py:workload"
[[jobs]]
name = "affine1"
target = "profile_affine.py:workload"
[[jobs]]
name = "multi0"
target = "multi_kernel.py"
[[jobs]]
name = "multi1"
target = "multi_kernel.py"
"""


def once(work: Path, workers: str) -> float:
    shutil.rmtree(work / "runs", ignore_errors=True)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "iket_cli", "run", "--jobs", workers, "-q"],
        cwd=work,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-bench-jobs-"))
    for name in ("profile_affine.py", "multi_kernel.py"):
        shutil.copy(ROOT / "examples" / name, work / name)
    (work / "iket.toml").write_text(CONFIG)
    times: dict[str, list[float]] = {"1": [], "auto": []}
    for run in range(args.runs):
        for workers in ("1", "auto") if run % 2 == 0 else ("auto", "1"):
            times[workers].append(once(work, workers))
    serial = statistics.median(times["1"])
    print("| --jobs | runs (s) | median (s) | ratio |")
    print("| --- | --- | --- | --- |")
    for workers, runs in times.items():
        median = statistics.median(runs)
        shown = ", ".join(f"{t:.2f}" for t in runs)
        print(f"| {workers} | {shown} | {median:.2f} | {median / serial:.2f}x |")
    if args.json:
        args.json.write_text(json.dumps(times, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
