"""``iket export`` of a warp trace with many small launches, against ``iket sql`` (issue 31, D22).

A ``--warp-trace`` capture of a real model holds thousands of launches of a few warps each; the
export was ~6 ms a launch (20,000 launches: 124 s, 2.1 GB) where ``iket sql`` builds the same
tables at ~1 ms. The trace here is made of two H200 captures: the warp trace
``tests/fixtures/warp_multi`` (27 launches of PyTorch and cuBLAS kernels, 4 to 16 warps each)
and the affine TIRx kernel's launch (one warp, one range, one mark): ``--shape instrumented``
repeats the affine launch (the slow case: every launch has ranges and marks), ``--shape mixed``
the 28 launches in turn (:func:`many_launches`). Side by side, interleaved, each run a fresh process:

* ``iket sql``: ``iket sql TRACE QUERY`` over the launches and warps tables (the anchor)
* ``iket export``: ``iket export TRACE -o DIR`` (goal: ≤ 1.5 ms a launch, ≤ 0.5 GB)
* ``iket export (BASE)``: the same from another checkout (``--base DIR``: e.g. a worktree of
  the commit before the change), where given

The export's row counts are checked against a recount from ``json.load`` first.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "warp_multi" / "iket_pid_0x7c4.trace.json"
INSTRUMENTED = ROOT / "tests" / "fixtures" / "affine" / "iket_pid_0x204.trace.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure, ratio_table  # noqa: E402
from bench_export import check  # noqa: E402  (the row counts against json.load)

#: A query that makes ``iket sql`` build the four per-launch tables.
QUERY = (
    "SELECT (SELECT count(*) FROM launches), (SELECT count(*) FROM warps), "
    "(SELECT count(*) FROM ranges), (SELECT count(*) FROM markers)"
)


def many_launches(count: int, out: Path, shape: str = "instrumented") -> Path:
    """A trace of ``count`` launches, repeated and shifted in time, each copy's records at
    locations of their own (in a real capture the location table grows with every launch):
    ``instrumented``: the affine TIRx kernel's launch (a warp, a range and a mark) each time;
    ``mixed``: the warp trace's 27 PyTorch launches and the affine one, in turn."""
    warp = json.loads(SOURCE.read_text())
    affine = json.loads(INSTRUMENTED.read_text())
    kinds = [(launch, warp["locationTable"]) for launch in warp["launches"]] if shape == "mixed" else []
    kinds.append((affine["launches"][0], affine["locationTable"]))
    launches, locations = [], []
    for index in range(count):
        source, table = kinds[index % len(kinds)]
        launch = copy.deepcopy(source)
        launch["gridId"] = index + 1
        shift = index * 100_000 - min(w["startTs"] for w in launch["warpLifetimes"])
        placed: dict[int, int] = {}

        def where(loc: int, table=table, placed=placed) -> int:
            if loc not in placed:
                locations.append(table[loc])
                placed[loc] = len(locations) - 1
            return placed[loc]

        for warp_record in launch["warpLifetimes"]:
            warp_record.update(startTs=warp_record["startTs"] + shift, endTs=warp_record["endTs"] + shift)
            warp_record["locIdx"] = where(warp_record["locIdx"])
        for record in launch["ranges"]:
            record.update(startTs=record["startTs"] + shift, endTs=record["endTs"] + shift)
            record["warpLocIdxs"] = [where(loc) for loc in record["warpLocIdxs"]]
            for event in record["internalEvents"]:
                event["timestamp"] += shift
        for mark in launch["markers"]:
            mark.update(timestamp=mark["timestamp"] + shift, locIdx=where(mark["locIdx"]))
        launches.append(launch)
    doc = {**warp, "launches": launches, "locationTable": locations, "stringTable": affine["stringTable"]}
    # in the decoder's own layout (compact, its key order), which iket reads the fast way
    out.write_text(json.dumps(doc, separators=(",", ":")))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--shape", choices=("instrumented", "mixed"), default="instrumented")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another checkout whose export runs beside this one's")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-bench-launches-"))
    trace = many_launches(args.launches, work / "iket_pid_0x1.trace.json", args.shape)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    iket = [sys.executable, "-m", "iket_cli"]
    cmds = {
        "iket sql": ([*iket, "sql", str(trace), QUERY, "--format", "csv"], env),
        "iket export": ([*iket, "export", str(trace), "-o", str(work / "ex")], env),
    }
    if args.base is not None:
        base_env = {**os.environ, "PYTHONPATH": str(args.base.resolve())}
        cmds["iket export (base)"] = (
            [*iket, "export", str(trace), "-o", str(work / "exb")],
            base_env,
        )
    args.json = args.json.resolve() if args.json else None
    os.chdir(work)  # python -m puts the working directory first: not this checkout for --base
    measure(*cmds["iket export"])
    counts = check(trace, work / "ex")
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in cmds}
    for run in range(args.runs):
        order = list(cmds.items())
        for name, (cmd, cmd_env) in order if run % 2 == 0 else order[::-1]:
            results[name].append(measure(cmd, cmd_env)[:2])
    size = trace.stat().st_size / 1e6
    print(f"trace: {args.launches:,} launches, {args.shape} ({size:.1f} MB); rows: {counts}")
    ratio_table(results, "iket sql", "command")
    for name, values in results.items():
        per = statistics.median(s for s, _ in values) / args.launches * 1000
        print(f"{name}: {per:.2f} ms a launch")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"launches": args.launches, "shape": args.shape, "runs": results, "rows": counts}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
