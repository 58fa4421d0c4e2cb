"""``iket profile --postprocess all`` against run-iket's at three capture sizes (issue 22, item 6).

On a GPU machine (TIRx + run-iket: ``source .gpu/gpu-env.sh``)::

    python3 bench/bench_scaling.py --iters 64,256,512 --launches 3 --json docs/gpu/bench_scaling.json
    python3 bench/bench_scaling.py --plot docs/gpu/bench_scaling.json --png docs/scaling.png   # anywhere

``tests/fixtures/workloads/big_kernel.py`` (132 CTAs x 12 warps, a ``body`` range around ITERS ``iter``
ranges with a ``half`` mark each, LAUNCHES launches: GRID*BLOCK/32*(2*ITERS+1)*LAUNCHES events)
is captured by both tools, interleaved, once per size. The post-processing seconds are the wall
time less the two workload passes (run-iket's ``--enable-stats``; iket's manifest phases).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "tests" / "fixtures" / "workloads" / "big_kernel.py"
GRID, BLOCK = 132, 384


def events(iters: int, launches: int) -> int:
    return GRID * BLOCK // 32 * (2 * iters + 1) * launches


def timed(argv: list[str], cwd: Path, env: dict) -> float:
    start = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-2000:]}")
    return seconds


def one_size(work: Path, iters: int, launches: int, fmt: str = "all", logs: Path | None = None) -> dict:
    import os

    env = {**os.environ, "ITERS": str(iters), "LAUNCHES": str(launches), "PYTHONPATH": str(ROOT)}
    run_iket = shutil.which("run-iket") or "run-iket"
    raw_argv = [run_iket, "-o", "raw", "--clobber", "profile", "--enable-stats", "--postprocess", fmt]
    raw = timed([*raw_argv, "--", "python3", "big_kernel.py"], work, env)
    stats = json.loads((work / "raw" / "run-iket.stats.json").read_text())["phases"]
    raw_passes = sum(stats[k]["durationNs"] for k in ("trackerWorkload", "profilingWorkload")) / 1e9
    argv = [sys.executable, "-m", "iket_cli", "profile", "big_kernel.py", "-o", "ours", "--clobber"]
    ours = timed([*argv, "--postprocess", fmt, "--tracker", "fresh", "-q"], work, env)
    manifest = json.loads((work / "ours" / "manifest.json").read_text())
    phases = manifest["phases"]
    if logs:  # iket's manifest and log (each decode's seconds), to see where the time went
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"scaling_{iters}_{fmt}.manifest.json").write_text(json.dumps(manifest, indent=1))
        if manifest.get("log") and (work / "ours" / manifest["log"]).is_file():
            shutil.copy(work / "ours" / manifest["log"], logs / f"scaling_{iters}_{fmt}.log")
    our_passes = phases["tracker"] + phases["capture"]
    shutil.rmtree(work / "raw")
    shutil.rmtree(work / "ours")
    return {
        "iters": iters,
        "launches": launches,
        "postprocess": fmt,
        "events": events(iters, launches),
        "run_iket_s": round(raw, 2),
        "iket_s": round(ours, 2),
        "ratio": round(ours / raw, 3),
        "run_iket_post_s": round(raw - raw_passes, 2),
        "iket_post_s": round(ours - our_passes, 2),
    }


def plot(rows: list[dict], png: Path, host: str = "the GPU host") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    millions = [r["events"] / 1e6 for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(millions, [r["run_iket_s"] for r in rows], "o-", label="run-iket profile --postprocess all")
    ax.plot(millions, [r["iket_s"] for r in rows], "o-", label="iket profile --postprocess all")
    ax.plot(millions, [r["run_iket_post_s"] for r in rows], "o--", label="run-iket: after the passes")
    ax.plot(millions, [r["iket_post_s"] for r in rows], "o--", label="iket: after the passes")
    ax.set_xlabel("events (millions: ranges + markers)")
    ax.set_ylabel("seconds (wall)")
    sizes = "/".join(str(r["iters"]) for r in rows)
    ax.set_title(f"big_kernel.py on {host}, LAUNCHES=3, ITERS={sizes}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", default="64,256,512")
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--postprocess", default="all", help="the formats both tools make (all, json, ..)")
    parser.add_argument("--logs", type=Path, help="keep iket's manifest and log of each size here")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path, help="draw a JSON written by --json (no GPU needed)")
    parser.add_argument("--png", type=Path, default=ROOT / "docs" / "scaling.png")
    parser.add_argument("--host", default="the GPU host", help="named in the plot's title")
    args = parser.parse_args()
    if args.plot:
        plot(json.loads(args.plot.read_text())["rows"], args.png, args.host)
        return 0
    work = Path(tempfile.mkdtemp(prefix="iket-scaling-"))
    shutil.copy(WORKLOAD, work)
    rows = []
    for iters in map(int, args.iters.split(",")):
        rows.append(one_size(work, iters, args.launches, args.postprocess, args.logs))
        print(json.dumps(rows[-1]), flush=True)
    print(
        "| ITERS | events | run-iket (s) | iket (s) | ratio | post run-iket (s) | post iket (s) "
        "| iket post s/M events |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        per = r["iket_post_s"] / (r["events"] / 1e6)
        print(
            f"| {r['iters']} | {r['events']:,} | {r['run_iket_s']} | {r['iket_s']} | {r['ratio']}x "
            f"| {r['run_iket_post_s']} | {r['iket_post_s']} | {per:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
