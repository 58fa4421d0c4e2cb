"""``iket postprocess --format perfetto`` against run-iket's, on a big capture (issue 35).

On a GPU machine (TIRx + run-iket: ``source .gpu/gpu-env.sh``)::

    python3 bench/bench_pftrace.py --iters 512 --launches 3 --runs 3 --check --json docs/gpu/pftrace.json

``tests/fixtures/workloads/big_kernel.py`` is captured once by run-iket (raw data kept, no
post-processing); then both tools post-process fresh copies of it, interleaved, ``--runs``
times (``--raw DIR_OR_TAR``: an existing raw capture instead, no GPU needed). Wall time and
peak memory of the whole process tree (medians) and iket's ratio to run-iket. ``--check``
reads the last pair of traces through Perfetto's own schema (``perfetto`` and ``protobuf``
importable) and says whether they are the same trace: tracks by path, slices by track, name,
time, duration and args. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure  # noqa: E402

WORKLOAD = ROOT / "tests" / "fixtures" / "workloads" / "big_kernel.py"


def captured(work: Path, iters: int, launches: int, env: dict, run_iket: str) -> Path:
    """big_kernel.py's raw capture by run-iket (``iket/`` kept, nothing decoded)."""
    shutil.copy(WORKLOAD, work)
    env = {**env, "ITERS": str(iters), "LAUNCHES": str(launches)}
    argv = [run_iket, "-o", "raw", "--clobber", "profile", "--keep", "--postprocess", "none"]
    done = subprocess.run([*argv, "--", "python3", "big_kernel.py"], cwd=work, env=env, capture_output=True)
    if done.returncode != 0:
        sys.exit(f"the capture failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return work / "raw"


def unpacked(work: Path, raw: Path) -> Path:
    if raw.is_dir():
        return raw
    with tarfile.open(raw) as archive:
        archive.extractall(work / "src", filter="data")
    return next((work / "src").rglob("iket")).parent


def view(path: Path):
    """The trace as Perfetto's schema reads it (tests/conftest.py's perfetto_view)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import perfetto_view

    return perfetto_view(path.read_bytes())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=512)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--raw", type=Path, help="a raw capture (folder or .tar.xz) instead of a new one")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--format", default="perfetto")
    parser.add_argument("--check", action="store_true", help="compare the last traces through the schema")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--save-raw", type=Path, help="keep the raw capture as this .tar.xz")
    args = parser.parse_args()
    from iket_cli.system import toolchain

    tool = toolchain.find()
    env = tool.child_env({**os.environ, "PYTHONPATH": str(ROOT)})
    work = Path(tempfile.mkdtemp(prefix="iket-bench-pftrace-"))
    source = (
        unpacked(work, args.raw) if args.raw else captured(work, args.iters, args.launches, env, tool.path)
    )
    if args.save_raw:
        with tarfile.open(args.save_raw, "w:xz") as archive:
            archive.add(source / "iket", arcname="capture/iket")
    raw_bytes = sum(p.stat().st_size for p in (source / "iket").rglob("iket.data.bin"))
    pair = [
        ("run-iket", lambda d: [tool.path, "postprocess", str(d), "--format", args.format]),
        (
            "iket",
            lambda d: [
                sys.executable,
                "-m",
                "iket_cli",
                "postprocess",
                "-q",
                str(d),
                "--format",
                args.format,
            ],
        ),
    ]
    results: dict[str, dict[str, list]] = {}
    for run in range(args.runs):
        for name, argv in pair if run % 2 == 0 else pair[::-1]:
            target = work / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source / "iket", target / "iket")
            seconds, peak, _ = measure(argv(target), env)
            entry = results.setdefault(name, {"s": [], "rss": []})
            entry["s"].append(round(seconds, 3))
            entry["rss"].append(peak)
    row = {
        "raw_mb": round(raw_bytes / 1e6, 1),
        "format": args.format,
        "cpus": len(os.sched_getaffinity(0)),
        **{f"{name}_s": results[name]["s"] for name in results},
        **{f"{name}_rss_mb": round(statistics.median(results[name]["rss"]) / 1e6) for name in results},
    }
    row["ratio"] = round(
        statistics.median(results["iket"]["s"]) / statistics.median(results["run-iket"]["s"]), 3
    )
    if args.check:
        ours = next((work / "iket").glob("iket_pid_*.pftrace"))
        theirs = next((work / "run-iket").glob("iket_pid_*.pftrace"))
        manifest = json.loads((work / "iket" / "manifest.json").read_text())
        row["joined"] = manifest["processes"][0]["artifacts"]["perfetto"].get("joined")
        row["same_bytes"] = ours.read_bytes() == theirs.read_bytes()
        row["same_trace"] = row["same_bytes"] or view(ours) == view(theirs)
    print(json.dumps(row), flush=True)
    print(
        "| raw (MB) | CPUs | run-iket (s, median) | iket (s, median) | ratio "
        "| peak RSS run-iket / iket (MB) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {row['raw_mb']} | {row['cpus']} | {statistics.median(results['run-iket']['s']):.2f} "
        f"| {statistics.median(results['iket']['s']):.2f} | {row['ratio']}x "
        f"| {row['run-iket_rss_mb']} / {row['iket_rss_mb']} |"
    )
    if args.json:
        args.json.write_text(json.dumps(row, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
