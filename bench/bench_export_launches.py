"""``iket export`` of a warp trace with many small launches, against ``iket sql`` (issue 31, D22).

A ``--warp-trace`` capture of a real model holds thousands of launches of a few warps each; the
export was ~6 ms a launch (20,000 launches: 124 s, 2.1 GB) where ``iket sql`` builds the same
tables at ~1 ms. The trace here is the H200 warp trace ``tests/fixtures/warp_multi`` (27
launches of PyTorch and cuBLAS kernels, 4 to 16 warps each) repeated to ``--launches``,
each copy shifted in time. Side by side, interleaved, each run a fresh process:

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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure, ratio_table  # noqa: E402

QUERY = (
    "SELECT count(*) AS launches, sum(w.n) AS warps FROM launches "
    "JOIN (SELECT launch, count(*) AS n FROM warps GROUP BY launch) w USING (launch)"
)


def many_launches(count: int, out: Path) -> Path:
    """A trace of ``count`` launches: the real warp trace's launches, repeated and shifted."""
    doc = json.loads(SOURCE.read_text())
    first = doc["launches"]
    span = max(w["endTs"] for x in first for w in x["warpLifetimes"]) - min(
        w["startTs"] for x in first for w in x["warpLifetimes"]
    )
    launches = []
    for index in range(count):
        launch = copy.deepcopy(first[index % len(first)])
        shift = (index // len(first)) * (span + 1000)
        launch["gridId"] = index + 1
        for warp in launch["warpLifetimes"]:
            warp["startTs"] += shift
            warp["endTs"] += shift
        launches.append(launch)
    out.write_text(json.dumps({**doc, "launches": launches}))
    return out


def check(trace: Path, out: Path) -> str:
    """The export's row counts against json.load's."""
    import pyarrow.parquet as pq

    doc = json.loads(trace.read_text())
    expected = {
        "launches": len(doc["launches"]),
        "warps": sum(len(x["warpLifetimes"]) for x in doc["launches"]),
    }
    found = {name: pq.read_table(out / f"{name}.parquet").num_rows for name in expected}
    if found != expected:
        raise SystemExit(f"the export's rows differ from json.load's: {found} != {expected}")
    return ", ".join(f"{name} {n:,}" for name, n in found.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another checkout whose export runs beside this one's")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-bench-launches-"))
    trace = many_launches(args.launches, work / "iket_pid_0x1.trace.json")
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
    measure(*cmds["iket export"])
    counts = check(trace, work / "ex")
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in cmds}
    for run in range(args.runs):
        order = list(cmds.items())
        for name, (cmd, cmd_env) in order if run % 2 == 0 else order[::-1]:
            results[name].append(measure(cmd, cmd_env)[:2])
    print(f"trace: {args.launches:,} launches ({trace.stat().st_size / 1e6:.1f} MB); rows: {counts}")
    ratio_table(results, "iket sql", "command")
    for name, values in results.items():
        per = statistics.median(s for s, _ in values) / args.launches * 1000
        print(f"{name}: {per:.2f} ms a launch")
    if args.json:
        args.json.write_text(
            json.dumps({"launches": args.launches, "runs": results, "rows": counts}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
