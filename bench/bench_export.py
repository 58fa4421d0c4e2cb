"""``iket export`` and ``iket sql`` on keep256 (1.6M events), against ``iket show`` and ``json.load``.

Side by side in one run, ``--runs`` times each, interleaved, each in a fresh process, on the
trace of keep256 (decoded from ``tests/fixtures/keep256_raw.tar.xz`` into ``--cache`` once):

* ``json.load``: ``python -c "json.load(open(TRACE))"``: what a user's own script starts with
* ``iket show``: ``iket show TRACE --format json``
* ``iket export``: ``iket export TRACE -o DIR --format parquet`` (goal: ≤ 1.5x show, peak memory ≤ 2x)
* ``iket sql (trace)``: ``iket sql TRACE QUERY``: end to end from the trace (goal ≤ 3 s)
* ``iket sql (export)``: ``iket sql DIR QUERY`` over the exported Parquet (goal ≤ 1.0 s)

QUERY is "mean range duration per SM". The row counts of the export are checked against a
recount from ``json.load`` before the timings are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure, ratio_table  # noqa: E402
from bench_trace import keep256  # noqa: E402

QUERY = "SELECT sm, name, avg(duration_ns) AS mean_ns, count(*) AS n FROM ranges GROUP BY ALL ORDER BY sm"


def commands(trace: Path, out: Path) -> dict[str, list[str]]:
    iket = [sys.executable, "-m", "iket_cli"]
    return {
        "json.load": [sys.executable, "-c", f"import json; json.load(open({str(trace)!r}))"],
        "iket show": [*iket, "show", str(trace), "--format", "json"],
        "iket export": [*iket, "export", str(trace), "-o", str(out), "--format", "parquet"],
        "iket sql (trace)": [*iket, "sql", str(trace), QUERY, "--format", "csv"],
        "iket sql (export)": [*iket, "sql", str(out), QUERY, "--format", "csv"],
    }


def check(trace: Path, out: Path) -> str:
    """The export's row counts against json.load's."""
    import pyarrow.parquet as pq

    doc = json.loads(trace.read_text())
    expected = {
        "launches": len(doc["launches"]),
        "warps": sum(len(x["warpLifetimes"]) for x in doc["launches"]),
        "ranges": sum(len(x["ranges"]) for x in doc["launches"]),
        "markers": sum(len(x["markers"]) for x in doc["launches"]),
    }
    found = {name: pq.read_table(out / f"{name}.parquet").num_rows for name in expected}
    if found != expected:
        raise SystemExit(f"the export's rows differ from json.load's: {found} != {expected}")
    return ", ".join(f"{name} {count:,}" for name, count in found.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "iket-bench-trace")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    trace = keep256(args.cache)
    out = Path(tempfile.mkdtemp(prefix="iket-bench-export-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmds = commands(trace, out)
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in cmds}
    measure(cmds["iket export"], env)  # the sql (export) runs read what it wrote
    counts = check(trace, out)
    for run in range(args.runs):
        order = list(cmds.items())
        for name, cmd in order if run % 2 == 0 else order[::-1]:
            results[name].append(measure(cmd, env)[:2])
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.0f} MB); export rows as json.load counts: {counts}")
    ratio_table(results, "iket show", "command")
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "rows": counts}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
