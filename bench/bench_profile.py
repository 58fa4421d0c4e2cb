"""Overhead of ``iket profile`` against raw run-iket and TIRx's ``iket.run``, on a GPU.

Ways to capture the same kernel (``examples/profile_affine.py``),
interleaved, ``--runs`` times each, in one process so that they share the machine's state:

* ``iket``: ``python -m iket_cli profile profile_affine.py:workload --tracker fresh`` (both
  passes, with its warm standby: the second pass is handed to a process that imported torch
  and TIRx during the first)
* ``iket-reuse``: the same with ``--tracker auto`` (the default), primed by one untimed capture:
  every timed run reuses the cached tracker pass and runs the workload once
* ``iket-script``: ``python -m iket_cli profile profile_affine.py --tracker fresh``, the plain
  script form (its ``__main__`` calls TIRx's ``iket.run``, which runs the workload when injected)
* ``iket-cold``: the same with ``--no-warm``: both passes import torch and TIRx themselves
* ``raw``: ``run-iket ... profile --postprocess all -- python3 -c "import profile_affine as p; p.workload()"``
* ``iket.run``: ``python3 profile_affine.py`` (its ``__main__`` calls TIRx's ``iket.run``)
* ``raw+env``: ``raw`` with ``TVM_TIRX_IKET_INJECTED_CHILD_ENABLE=1``, which iket (like TIRx's
  own profile) sets in both passes: it separates iket's cost from that variable's.

Prints a markdown table (median wall seconds and ratios) and, with ``--json FILE``, the raw
figures.
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


def variants(work: Path) -> dict[str, tuple[list[str], Path]]:
    py = sys.executable
    run_iket = shutil.which("run-iket") or "run-iket"
    workload = ["python3", "-c", "import profile_affine as p; p.workload()"]

    def raw(out: str, prefix: tuple[str, ...] = ()) -> tuple[list[str], Path]:
        argv = [
            *prefix,
            run_iket,
            "-o",
            out,
            "--clobber",
            "profile",
            "--enable-stats",
            "--postprocess",
            "all",
        ]
        return [*argv, "--", *workload], work / out

    iket = [
        py,
        "-m",
        "iket_cli",
        "profile",
        "profile_affine.py:workload",
        "-o",
        "out-iket",
        "--clobber",
        "-q",
    ]
    cold = [*iket[:6], "out-iket-cold", "--clobber", "-q", "--no-warm", "--tracker", "fresh"]
    reuse = [*iket[:6], "out-iket-reuse", "--clobber", "-q"]
    script = [*iket[:4], "profile_affine.py", "-o", "out-iket-script", "--clobber", "-q"]
    script += ["--tracker", "fresh"]
    return {
        "iket": ([*iket, "--tracker", "fresh"], work / "out-iket"),
        "iket-reuse": (reuse, work / "out-iket-reuse"),
        "iket-script": (script, work / "out-iket-script"),
        "iket-cold": (cold, work / "out-iket-cold"),
        "raw": raw("out-raw"),
        "iket.run": ([py, "profile_affine.py"], work / "iket_affine_trace"),
        "raw+env": raw("out-raw-env", ("env", "TVM_TIRX_IKET_INJECTED_CHILD_ENABLE=1")),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--variants", default="iket,iket-cold,raw,iket.run", help="comma-separated")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-bench-"))
    shutil.copy(ROOT / "examples/profile_affine.py", work)
    chosen = args.variants.split(",")
    order = [(name, spec) for name, spec in variants(work).items() if name in chosen]
    os.environ["IKET_CACHE_DIR"] = str(work / "cache")  # the reuse variant's own, empty cache
    for name, (cmd, _) in order:
        if name == "iket-reuse":  # prime it: the timed runs are second captures
            subprocess.run(cmd, cwd=work, capture_output=True, check=True)
    times: dict[str, list[float]] = {name: [] for name, _ in order}
    own: list[float] = []  # iket's wall time minus its run-iket child's
    warm_used: list[bool] = []  # did the default iket run hand a pass to its warm standby?
    passes: dict[str, list[float]] = {}  # tracker + capture pass seconds, from run-iket's stats
    for round_ in range(args.runs):
        for name, (cmd, out) in (
            order[round_ % len(order) :] + order[: round_ % len(order)]
        ):  # rotate: no order bias
            if name == "iket.run":
                shutil.rmtree(out, ignore_errors=True)  # iket.run refuses an existing dir
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
            times[name].append(time.perf_counter() - start)
            if proc.returncode != 0 or not out.is_dir():
                print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
                raise SystemExit(f"{name} failed with exit {proc.returncode}")
            if name.startswith("iket-") or name == "iket":
                record = json.loads((out / "manifest.json").read_text())
                phases = record["phases"]
                if name == "iket":
                    own.append(times[name][-1] - phases["run_iket"])
                    warm_used.append(bool((record.get("warm") or {}).get("used")))
                passes.setdefault(name, []).append((phases["tracker"] or 0) + phases["capture"])
            elif name.startswith("raw"):
                stats = json.loads((out / "run-iket.stats.json").read_text())["phases"]
                ns = stats["trackerWorkload"]["durationNs"] + stats["profilingWorkload"]["durationNs"]
                passes.setdefault(name, []).append(ns / 1e9)
    med = {name: statistics.median(values) for name, values in times.items()}
    anchor = "iket.run" if "iket.run" in med else None  # the second column only when it ran
    print("| capture | runs (s) | median (s) | vs raw run-iket |" + (" vs iket.run |" if anchor else ""))
    print("| --- | --- | --- | --- |" + (" --- |" if anchor else ""))
    for name, values in times.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        tail = f" {med[name] / med[anchor]:.3f}x |" if anchor else ""
        print(
            f"| {name} | {runs} | {med[name]:.2f} | {med[name] / med['raw']:.3f}x "
            f"({med[name] - med['raw']:+.2f} s) |{tail}"
        )
    if own:  # the default iket variant ran
        print(
            f"\niket's own time outside run-iket (CLI start, checks, manifest, publish): "
            f"median {statistics.median(own):.3f} s, runs {', '.join(f'{v:.3f}' for v in own)}; "
            f"warm standby used in {sum(warm_used)} of {len(warm_used)} runs"
        )
    for name, values in passes.items():  # the workload passes alone: where the noise lives
        print(
            f"{name}: tracker + capture passes median {statistics.median(values):.2f} s "
            f"({', '.join(f'{v:.2f}' for v in values)})"
        )
    if args.json:
        record = {"times_s": times, "median_s": med, "own_s": own, "passes_s": passes, "warm_used": warm_used}
        args.json.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
