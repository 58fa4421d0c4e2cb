"""``iket export`` and ``iket sql`` through the real CLI, the Python API's tables, and what a
machine without the ``sql`` extra is told."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from conftest import FIXTURES, kept, project_module, run_iket

pytest.importorskip("duckdb")


def test_export_parquet_and_csv(tmp_path):
    import pyarrow.parquet as pq

    done = run_iket("export", FIXTURES / "multi", "-o", tmp_path / "t", cwd=tmp_path)
    assert done.code == 0, done
    names = sorted(p.name for p in (tmp_path / "t").iterdir())
    assert names == sorted(
        f"{t}.parquet"
        for t in ("processes", "kernels", "launches", "warps", "ranges", "markers", "flows", "stages")
    )
    assert pq.read_table(tmp_path / "t" / "ranges.parquet").num_rows == 208
    assert pq.read_table(tmp_path / "t" / "markers.parquet").num_rows == 192
    done = run_iket("export", FIXTURES / "multi", "-o", tmp_path / "c", "--format", "csv", cwd=tmp_path)
    assert done.code == 0, done
    rows = list(csv.DictReader(io.StringIO((tmp_path / "c" / "markers.csv").read_text())))
    assert len(rows) == 192 and rows[0]["range_name"] == "step" and rows[0]["name"] == "stepped"
    assert not list((tmp_path / "c").glob(".*.tmp")), "no temporary file left"


def test_sql_answers_a_question_and_lists_the_schema(tmp_path):
    query = "SELECT name, count(*) AS n, median(duration_ns) AS p50 FROM ranges GROUP BY name ORDER BY name"
    done = run_iket("sql", FIXTURES / "multi", query, "--format", "json", cwd=tmp_path)
    assert done.code == 0, done
    result = json.loads(done.stdout)
    assert result["columns"] == ["name", "n", "p50"]
    assert [(r["name"], r["n"]) for r in result["rows"]] == [("copy", 16), ("step", 192)]
    table = run_iket("sql", FIXTURES / "multi", query, cwd=tmp_path)
    assert table.code == 0 and "2 row(s)" in table.stdout and "step" in table.stdout
    schema = run_iket("sql", FIXTURES / "multi", "--schema", cwd=tmp_path)
    assert schema.code == 0 and "ranges (208 rows)" in schema.stdout and "duration_ns" in schema.stdout


def test_two_captures_in_one_query(tmp_path):
    query = "SELECT capture, count(*) AS n, min(duration_ns) AS shortest FROM ranges GROUP BY ALL ORDER BY 1"
    done = run_iket(
        "sql",
        f"base={FIXTURES / 'affine'}",
        f"new={FIXTURES / 'spawn'}",
        query,
        "--format",
        "csv",
        cwd=tmp_path,
    )
    assert done.code == 0, done
    assert done.stdout.splitlines() == ["capture,n,shortest", "base,1,224", "new,2,192"]


def test_mark_offsets_by_join_equal_show(tmp_path):
    join = (
        "SELECT m.name, m.ts - r.start_ts AS held_for FROM markers m JOIN ranges r ON m.range_id = r.id "
        "ORDER BY held_for"
    )
    done = run_iket("sql", FIXTURES / "multi", join, "--format", "json", cwd=tmp_path)
    assert done.code == 0, done
    offsets = [row["held_for"] for row in json.loads(done.stdout)["rows"]]
    shown = json.loads(run_iket("show", FIXTURES / "multi", "--format", "json", cwd=tmp_path).stdout)
    (mark,) = shown["processes"][0]["kernels"][0]["markers"]
    stats = mark["offset_from_range"]
    assert len(offsets) == stats["count"] == 192
    assert (offsets[0], offsets[-1]) == (stats["min"], stats["max"])
    assert offsets[(len(offsets) + 1) // 2 - 1] == stats["p50"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["SELEC nothing"], "the query failed: Parser Error"),
        (["SELECT * FROM nothing"], "the query failed: Catalog Error"),
        ([], "give a capture and a query"),
    ],
)
def test_bad_queries_are_one_line(tmp_path, args, message):
    done = run_iket("sql", FIXTURES / "multi", *args, cwd=tmp_path)
    assert done.code == 2 and message in done.stderr and "Traceback" not in done.stderr, done


def test_missing_capture_is_named(tmp_path):
    done = run_iket("sql", tmp_path / "nope", "SELECT 1", cwd=tmp_path)
    assert done.code == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("missing", ["pyarrow", "duckdb"])
def test_without_the_sql_extra_the_commands_say_what_to_install(tmp_path, missing):
    blocked = tmp_path / "blocked"
    (blocked / missing).mkdir(parents=True)
    (blocked / missing / "__init__.py").write_text(f"raise ImportError('no {missing} here')\n")
    env = {"PYTHONPATH": str(blocked)}
    done = run_iket("sql", FIXTURES / "affine", "SELECT 1", cwd=tmp_path, env=env)
    assert done.code == 2 and "pip install 'iket-cli[sql]'" in done.stderr, done
    assert f"{missing}, which is not installed" in done.stderr and "Traceback" not in done.stderr
    if missing == "pyarrow":
        exported = run_iket("export", FIXTURES / "affine", "-o", tmp_path / "t", cwd=tmp_path, env=env)
        assert exported.code == 2 and "pip install 'iket-cli[sql]'" in exported.stderr, exported
    assert run_iket("--help", cwd=tmp_path, env=env).code == 0, "the CLI itself does not need it"


def test_python_api_tables_and_duckdb(tmp_path):
    import iket_cli

    folder = kept(tmp_path, "multi")
    assert run_iket("postprocess", folder, "--format", "json", cwd=tmp_path).code == 0
    capture = iket_cli.Capture.load(folder)
    tables = capture.tables()
    assert tables["ranges"].num_rows == 208 and tables["warps"].num_rows == 64
    frame = tables["launches"].to_pandas() if _has("pandas") else None
    assert frame is None or len(frame) == 4
    connection = capture.to_duckdb()
    ((count,),) = connection.sql("SELECT count(*) FROM markers WHERE range_name = 'step'").fetchall()
    assert count == 192


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_the_cli_start_up_imports_neither(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, runpy\nsys.argv = ['iket', '--help']\n"
        "try:\n    runpy.run_module('iket_cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'duckdb', 'numpy')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_csv_export_of_an_empty_table(tmp_path):
    """A warp trace has no ranges or markers: those tables are written, with no row."""
    done = run_iket("export", FIXTURES / "warp_multi", "-o", tmp_path / "w", "--format", "csv", cwd=tmp_path)
    assert done.code == 0, done
    assert (tmp_path / "w" / "ranges.csv").read_text().count("\n") == 1, "a header, no row"
    assert Path(tmp_path / "w" / "warps.csv").read_text().count("\n") == 169, "a header, a row per warp"


def test_sql_reads_exported_tables_as_a_capture(tmp_path):
    """After iket export, iket sql reads the Parquet files instead of the traces, and names
    them like any capture."""
    assert run_iket("export", FIXTURES / "multi", "-o", tmp_path / "t", cwd=tmp_path).code == 0
    query = "SELECT capture, count(*) AS n, sum(duration_ns) AS total FROM ranges GROUP BY ALL ORDER BY 1"
    done = run_iket(
        "sql", f"a={tmp_path / 't'}", f"b={FIXTURES / 'multi'}", query, "--format", "csv", cwd=tmp_path
    )
    assert done.code == 0, done
    _header, first, second = done.stdout.splitlines()
    assert (
        first.split(",")[1:] == second.split(",")[1:] and first.startswith("a,") and second.startswith("b,")
    )


def test_an_export_of_two_thousand_launches_is_whole_and_small(tmp_path):
    """D22: a warp trace of thousands of small launches (each with a range and a mark). Every
    row is there, as json.load counts it, ids run on across launches, and the export stays
    under 0.5 GB (it was 2.1 GB at 20,000 launches; its time is bench/bench_export_launches.py's)."""
    import subprocess
    import sys

    pq = pytest.importorskip("pyarrow.parquet")
    trace = project_module("bench", "bench_export_launches").many_launches(
        2000, tmp_path / "iket_pid_0x1.trace.json"
    )
    script = (
        "import sys\n"
        "from iket_cli.cli import main\n"
        "try:\n"
        f"    main(['export', {str(trace)!r}, '-o', {str(tmp_path / 'ex')!r}])\n"
        "except SystemExit as done:\n"
        "    code = done.code\n"
        # this process's own peak (VmHWM): ru_maxrss keeps the forking pytest's size across exec
        "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "print(peak, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    peak_kb = int(done.stderr.split()[-1])
    assert peak_kb < 500 * 1024, f"{peak_kb / 1024:.0f} MB"
    doc = json.loads(trace.read_text())
    records = {"warps": "warpLifetimes", "ranges": "ranges", "markers": "markers"}
    for table in ("launches", *records):
        written = pq.ParquetFile(tmp_path / "ex" / f"{table}.parquet")
        want = sum(len(x[records[table]]) for x in doc["launches"]) if table in records else 2000
        assert written.metadata.num_rows == want, table
        # written in batches, not a row group per launch (2,000 of them: slow to write and read)
        assert written.metadata.num_row_groups <= 2, (table, written.metadata.num_row_groups)
    ranges = pq.read_table(tmp_path / "ex" / "ranges.parquet").to_pydict()
    markers = pq.read_table(tmp_path / "ex" / "markers.parquet").to_pydict()
    assert ranges["id"] == list(range(2000)) and ranges["launch"] == list(range(2000))
    assert markers["range_id"] == ranges["id"], "each mark inside its launch's range"


def test_flows_and_stages_tables_equal_the_pairing_and_show_pipeline(tmp_path):
    """Issue 33, item 3: every arrow (no cap), joinable to ranges; the stages of --pipeline."""
    from iket_cli.analysis import flows
    from iket_cli.model import annotations, trace

    pipe = FIXTURES / "cute_pipeline"
    query = (
        "SELECT s.name AS source, t.name AS target, count(*) AS n, min(f.lag_ns) AS low, "
        "min(t.start_ts - s.end_ts) AS check_low FROM flows f JOIN ranges s ON s.capture = f.capture "
        "AND s.id = f.source_id JOIN ranges t ON t.capture = f.capture AND t.id = f.target_id GROUP BY ALL"
    )
    done = run_iket("sql", pipe, query, "--format", "json", cwd=tmp_path)
    assert done.code == 0, done
    (row,) = json.loads(done.stdout)["rows"]
    loaded = trace.load(next(pipe.glob("iket_pid_*.trace.json")))
    assert len(flows.pair(loaded, annotations.dags_for(pipe))) == row["n"] == 1024
    assert (row["source"], row["target"], row["low"]) == ("load", "reduce", row["check_low"])
    staged = run_iket("sql", pipe, "SELECT * FROM stages ORDER BY stage", "--format", "json", cwd=tmp_path)
    shown = run_iket("show", pipe, "--pipeline", "--format", "json", cwd=tmp_path)
    (kernel,) = json.loads(shown.stdout)["processes"][0]["kernels"]
    rows = json.loads(staged.stdout)["rows"]
    assert [r["stage"] for r in rows] == sorted(s["name"] for s in kernel["stages"])
    for r in rows:
        (stage,) = [s for s in kernel["stages"] if s["name"] == r["stage"]]
        assert (r["busy"], r["period_ns"], r["starved_ns"]) == (
            stage["busy"],
            stage["period_ns"],
            stage["starved_ns"],
        )
        assert r["bound"] == (r["stage"] == kernel["bound"])


def test_a_folder_exported_before_the_flows_and_stages_tables_is_still_read(tmp_path):
    assert run_iket("export", FIXTURES / "cute_pipeline", "-o", tmp_path / "t", cwd=tmp_path).code == 0
    for later in ("flows", "stages"):
        (tmp_path / "t" / f"{later}.parquet").unlink()
    done = run_iket(
        "sql", tmp_path / "t", "SELECT count(*) AS n FROM ranges", "--format", "csv", cwd=tmp_path
    )
    assert done.code == 0 and done.stdout.splitlines()[1] == "3328", done
    empty = run_iket(
        "sql", tmp_path / "t", "SELECT count(*) AS n FROM flows", "--format", "csv", cwd=tmp_path
    )
    assert empty.code == 0 and empty.stdout.splitlines()[1] == "0", empty


def test_a_missing_extra_under_load_is_always_the_one_line_error(tmp_path):
    """DuckDB is imported in a thread while the traces load; an exit while it loads (pyarrow
    missing, found first) ended some runs with status 1 or SIGABRT under load. The thread is
    joined now: every run says the one line, exit 2."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    blocked = tmp_path / "blocked" / "pyarrow"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    env = {**os.environ, "PYTHONPATH": str(blocked.parent)}
    argv = [sys.executable, "-m", "iket_cli", "sql", str(FIXTURES / "affine"), "SELECT 1"]

    def once(_):
        return subprocess.run(
            argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60
        )

    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(once, range(16)))
    assert [r.returncode for r in runs] == [2] * 16, [r.stderr[-300:] for r in runs if r.returncode != 2][:2]
    assert all("Traceback" not in r.stderr and "terminate" not in r.stderr for r in runs)
