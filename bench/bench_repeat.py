"""Five samples of a kernel: ``iket profile --repeat 5`` against five captures, on a GPU.

The same kernel (``examples/profile_affine.py``), interleaved ``--runs`` times, in one process:

* ``repeat5``: ``iket profile profile_affine.py:workload --repeat 5 --tracker fresh``: one
  tracker pass, five capture passes, each with a warm standby that imported torch while the
  run before it ran
* ``5x raw``: five ``run-iket ... profile --postprocess all`` one after another (each two passes)
* ``5x iket``: five ``iket profile ... --tracker fresh`` one after another

Prints a markdown table (median wall seconds and ratios; goal of issue 18: ``repeat5`` ≤ 0.5x
of ``5x raw``) and, with ``--json FILE``, the raw figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMES = 5


def commands(work: Path) -> dict[str, list[list[str]]]:
    py = sys.executable
    run_iket = shutil.which("run-iket") or "run-iket"
    workload = ["python3", "-c", "import profile_affine as p; p.workload()"]
    iket = [py, "-m", "iket_cli", "profile", "profile_affine.py:workload", "--clobber", "-q"]
    raw = [run_iket, "--clobber", "profile", "--enable-stats", "--postprocess", "all", "--", *workload]
    return {
        "repeat5": [[*iket, "-o", "out-repeat", "--repeat", str(TIMES), "--tracker", "fresh"]],
        "5x raw": [[raw[0], "-o", f"out-raw-{i}", *raw[1:]] for i in range(TIMES)],
        "5x iket": [[*iket, "-o", f"out-iket-{i}", "--tracker", "fresh"] for i in range(TIMES)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-bench-repeat-"))
    shutil.copy(ROOT / "examples/profile_affine.py", work)
    order = list(commands(work).items())
    times: dict[str, list[float]] = {name: [] for name, _ in order}
    for round_ in range(args.runs):
        for name, cmds in order[round_ % len(order) :] + order[: round_ % len(order)]:
            start = time.perf_counter()
            for cmd in cmds:
                done = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
                if done.returncode != 0:
                    print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
                    raise SystemExit(f"{name} failed with exit {done.returncode}")
            times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(values) for name, values in times.items()}
    print("| capture | runs (s) | median (s) | vs 5x raw run-iket | vs 5x iket |")
    print("| --- | --- | --- | --- | --- |")
    for name, values in times.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(
            f"| {name} | {runs} | {med[name]:.2f} | {med[name] / med['5x raw']:.3f}x | "
            f"{med[name] / med['5x iket']:.3f}x |"
        )
    record = json.loads((work / "out-repeat" / "manifest.json").read_text())
    passes = [r["capture_s"] for r in record["repeats"]]
    print(f"\nrepeat5: capture passes {', '.join(f'{s:.2f}' for s in passes)} s; phases {record['phases']}")
    print(f"warm standby logs: {sorted(p.name for p in (work / 'out-repeat').glob('warm*.log'))}")
    if args.json:
        args.json.write_text(
            json.dumps({"times_s": times, "median_s": med, "repeat_passes_s": passes}, indent=2)
        )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
