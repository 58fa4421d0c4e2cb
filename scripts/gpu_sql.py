"""SQL over a capture made on the GPU (issue 19): ``python -m pytest -m gpu scripts/gpu_sql.py``.

Two calls on the GPU machine, as for CuTe DSL (the TIRx stack and DuckDB's wheel do not fit in
one): the first (``source .gpu/gpu-env.sh``) captures ``examples/multi_kernel.py`` with a JSON
trace into ``$IKET_GPU_KEEP/sql-cap`` and exports its tables (pyarrow is on the machine),
checked against a recount with ``json.load``; the second (DuckDB installed from the carried
wheel) queries that capture with ``iket sql`` and checks the answers against ``iket show``.
Each test is skipped where its part is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KEEP = Path(os.environ.get("IKET_GPU_KEEP", "/tmp/iket-gpu-keep"))
CAPTURE = KEEP / "sql-cap"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
]


def iket(*args, cwd: Path = KEEP) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "iket_cli", *map(str, args)],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=400,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.skipif(importlib.util.find_spec("tvm_tirx") is None, reason="TIRx is not installed")
def test_capture_and_export_match_a_recount(tmp_path):
    KEEP.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "examples" / "multi_kernel.py", tmp_path)
    iket("profile", "multi_kernel.py", "-o", CAPTURE, "--clobber", "--postprocess", "json", cwd=tmp_path)
    iket("export", CAPTURE, "-o", KEEP / "sql-tables")
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_export import check  # the export's row counts against json.load's

    (trace,) = CAPTURE.glob("*.trace.json")
    counts = check(trace, KEEP / "sql-tables")
    print("export rows:", counts)
    assert "ranges 0," not in counts


@pytest.mark.skipif(importlib.util.find_spec("duckdb") is None, reason="DuckDB is not installed")
@pytest.mark.skipif(not (CAPTURE / "manifest.json").is_file(), reason="no capture from the first call")
def test_sql_answers_as_show_does():
    query = (
        "SELECT name, count(*) AS n, min(duration_ns) AS lo, max(duration_ns) AS hi FROM ranges GROUP BY name"
    )
    rows = {r["name"]: r for r in json.loads(iket("sql", CAPTURE, query, "--format", "json").stdout)["rows"]}
    shown = json.loads(iket("show", CAPTURE, "--format", "json").stdout)
    for kernel in shown["processes"][0]["kernels"]:
        for line in kernel["ranges"]:
            d = line["durations"]
            assert (rows[line["name"]]["n"], rows[line["name"]]["lo"], rows[line["name"]]["hi"]) == (
                d["count"],
                d["min"],
                d["max"],
            )
    per_sm = iket(
        "sql", KEEP / "sql-tables", "SELECT sm, avg(duration_ns) FROM ranges GROUP BY sm", "--format", "csv"
    )
    print(per_sm.stdout[:800])
    assert per_sm.stdout.count("\n") > 1
