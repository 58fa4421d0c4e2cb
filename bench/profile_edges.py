"""Where ``iket profile``'s seconds after the passes go: its start, the passes, the postprocess
phase, and what comes before the manifest's start and after its end (issue 35).

On a GPU machine (TIRx + run-iket: ``source .gpu/gpu-env.sh``)::

    python3 bench/profile_edges.py --iters 512 --runs 2 [--cprofile OUT.txt]

Captures ``tests/fixtures/workloads/big_kernel.py`` with ``iket profile --postprocess all``
``--runs`` times and splits each run's wall time by the manifest: ``start`` (the process's
spawn to its ``started_at``: interpreter, imports, the plan), the two passes and run-iket's own
process around them, ``setup+publish`` (the rest of ``duration_s`` beside the passes and the
postprocess phase) and ``end`` (``finished_at`` to the process's exit: publishing, closing,
the interpreter's exit). ``--cprofile`` runs it once more under cProfile (the CLI's main thread)
and writes the functions with the most cumulative time. Not a test: a measuring aid for
docs/history/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "tests" / "fixtures" / "workloads" / "big_kernel.py"
COLUMNS = (
    "wall",
    "start",
    "passes",
    "run-iket own",
    "postprocess",
    "setup+publish",
    "end",
    "after the passes",
)


def one_run(work: Path, env: dict, prefix: list[str], script: str) -> dict[str, float]:
    """One capture's wall time, split by its manifest."""
    argv = [*prefix, "-m", "iket_cli", "profile", script, "-o", "ours", "--clobber"]
    spawned = time.time()
    done = subprocess.run(
        [*argv, "--postprocess", "all", "--tracker", "fresh", "-q"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    exited = time.time()
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {done.stderr[-2000:]}")
    manifest = json.loads((work / "ours" / "manifest.json").read_text())
    shutil.rmtree(work / "ours")
    phases = manifest["phases"]
    passes = phases["tracker"] + phases["capture"]
    started = datetime.fromisoformat(manifest["started_at"]).timestamp()
    finished = datetime.fromisoformat(manifest["finished_at"]).timestamp()
    return {
        "wall": exited - spawned,
        "start": started - spawned,
        "passes": passes,
        "run-iket own": phases["run_iket"] - passes,
        "postprocess": phases["postprocess"],
        "setup+publish": manifest["duration_s"] - phases["run_iket"] - phases["postprocess"],
        "end": exited - finished,
        "after the passes": exited - spawned - passes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=512)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--cprofile", type=Path, help="write the CLI's main thread's profile of one more run here"
    )
    parser.add_argument("--workload", type=Path, default=WORKLOAD, help="the script captured (big_kernel.py)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-edges-"))
    shutil.copy(args.workload, work)
    env = {**os.environ, "ITERS": str(args.iters), "LAUNCHES": str(args.launches), "PYTHONPATH": str(ROOT)}
    try:
        rows = [one_run(work, env, [sys.executable], args.workload.name) for _ in range(args.runs)]
        print("| run | " + " | ".join(COLUMNS) + " |")
        print("| ---: |" + " ---: |" * len(COLUMNS))
        for number, row in enumerate(rows, 1):
            print(f"| {number} | " + " | ".join(f"{row[c]:.2f}" for c in COLUMNS) + " |")
        if args.cprofile:
            stats = work / "profile.stats"
            one_run(work, env, [sys.executable, "-m", "cProfile", "-o", str(stats)], args.workload.name)
            import pstats

            with args.cprofile.open("w") as out:
                pstats.Stats(str(stats), stream=out).sort_stats("cumulative").print_stats(60)
            print(f"profile: {args.cprofile}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
