"""``iket show --pipeline`` against plain ``iket show`` on a big pipelined trace (issue 33).

The trace is generated here in the decoder's compact layout: CTAS CTAs, each with a producer
warp running ``load`` per tile and four consumer warps each running ``wait`` then ``reduce``
per tile, TILES tiles (the shape of examples/cute_pipeline.py, made large), with its
``*.iket_dag.json`` (``load -> reduce``) beside it. Over a million ranges by default. Side by
side, interleaved, each run a fresh process: ``iket show TRACE --format json`` (the anchor)
and ``iket show TRACE --pipeline --format json`` (goal: at most 1.5x).

    python bench/bench_show_pipeline.py [--ctas 264] [--tiles 512] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure, ratio_table  # noqa: E402

WARPS = 5  # one producer, four consumers


def write(folder: Path, ctas: int, tiles: int, reduce_ns: int = 180) -> tuple[Path, int]:
    """The trace and its DAG in ``folder``; the number of ranges. The producer loads a tile
    every 1,000 ns (900 ns of work); each consumer waits (``wait``) until its tile is loaded
    and its previous ``reduce`` (``reduce_ns`` long) has ended."""
    strings = ["load", "reduce", "wait"]
    ranges, lifetimes = [], []
    for cta in range(ctas):
        base = 10**9 + cta * 10**7
        for warp in range(WARPS):
            loc = cta * WARPS + warp
            free = base
            for k in range(tiles):
                ready = base + (k + 1) * 1000
                if warp == 0:
                    ranges.append(_range(0, loc, ready - 900, ready, 1))
                    continue
                start = max(ready, free) + 20
                ranges.append(_range(2, loc, free, start - 10, 1))
                ranges.append(_range(1, loc, start, start + reduce_ns, 2))
                free = start + reduce_ns
            end = max(free, base + tiles * 1000) + 500
            lifetimes.append(f'{{"endTs":{end},"locIdx":{loc},"startTs":{base}}}')
    table = ",".join(
        f'{{"ctaId":[{c},0,0],"gpcId":0,"smId":0,"tpcId":0,"warpId":{w}}}'
        for c in range(ctas)
        for w in range(WARPS)
    )
    launch = (
        f'{{"blockDimX":{32 * WARPS},"blockDimY":1,"blockDimZ":1,"contextId":1,'
        f'"enabledCluster":{{"x":1,"y":1,"z":1}},"gridDimX":{ctas},"gridDimY":1,"gridDimZ":1,"gridId":1,'
        f'"kernelName":"rowsum","markers":[],"ranges":[{",".join(ranges)}],"singleClusterActive":0,'
        f'"warpLifetimes":[{",".join(lifetimes)}]}}'
    )
    doc = (
        f'{{"graphLaunches":{{}},"launches":[{launch}],"locationTable":[{table}],"meta":{{"version":1}},'
        f'"stringTable":{json.dumps(strings)}}}'
    )
    trace = folder / "iket_pid_0x1.trace.json"
    trace.write_text(doc)
    dag = {"name": "rowsum", "edges": [{"source": "load", "target": "reduce"}]}
    (folder / "rowsum.iket_dag.json").write_text(json.dumps(dag))
    return trace, len(ranges)


def _range(name: int, loc: int, start: int, end: int, kind: int) -> str:
    return (
        f'{{"endTs":{end},"internalEvents":[],"rangeColor":0,"rangeId":1,"rangeNameIdx":{name},'
        f'"rangeScope":0,"rangeType":{kind},"startTs":{start},"warpLocIdxs":[{loc},{loc}]}}'
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ctas", type=int, default=264)
    parser.add_argument("--tiles", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as scratch:
        trace, count = write(Path(scratch), args.ctas, args.tiles)
        size = trace.stat().st_size / 1e6
        print(
            f"trace: {count:,} ranges, {size:.0f} MB ({args.ctas} CTAs x {WARPS} warps x {args.tiles} tiles)"
        )
        commands = {
            "iket show": [sys.executable, "-m", "iket_cli", "show", str(trace), "--format", "json"],
            "iket show --pipeline": [
                sys.executable,
                "-m",
                "iket_cli",
                "show",
                str(trace),
                "--pipeline",
                "--format",
                "json",
            ],
        }
        results: dict[str, list] = {name: [] for name in commands}
        shown = None
        for _ in range(args.runs):
            for name, cmd in commands.items():
                seconds, peak, out = measure(cmd, env, capture=True)
                results[name].append((seconds, peak))
                if name.endswith("--pipeline"):
                    shown = json.loads(out)
        (kernel,) = shown["processes"][0]["kernels"]
        print(f"bound: {kernel['bound']}; {kernel['sentence']}")
        ratio_table(results, "iket show", f"{count:,} ranges")


if __name__ == "__main__":
    main()
