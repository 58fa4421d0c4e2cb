"""Reads and writes outside the output root (issue 31: D4a, D4b, D7, D8, D13, D21), each
through the real CLI: planted symlinks, ``..`` in a manifest, SQL that reaches for files, a
folder named ``~``, an alias of DIR, and outputs that would overwrite what a command reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from iket_cli.capture import outdir
from iket_cli.model import manifest
from iket_cli.model.vocab import TABLE_NAMES

from conftest import FIXTURES, snapshot

AFFINE_TRACE = "iket_pid_0x204.trace.json"
TRACE = f"cap/{AFFINE_TRACE}"


def another_capture(harness, name: str = "other"):
    """A copy of the previous capture that is another capture (merge refuses copies)."""
    folder = harness.work / name
    shutil.copytree(harness.work / "cap", folder)
    record = json.loads((folder / "manifest.json").read_text())
    record["started_at"] = "2026-01-01T00:00:00.000+00:00"
    (folder / "manifest.json").write_text(json.dumps(record))
    return folder


def plant(link, victim) -> None:
    victim.write_text("victim's data\n")
    link.symlink_to(victim)


def test_a_planted_lock_symlink_is_never_written_through(harness):
    """D4a: ``ln -s victim .c.iket.lock`` beside DIR."""
    victim = harness.work / "victim"
    plant(harness.work / ".c.iket.lock", victim)
    result = harness.profile("-o", "c", "w.py:workload")
    assert result.code == 2, result
    assert "is a symlink, which iket never writes through" in result.stderr
    assert victim.read_text() == "victim's data\n"
    assert not (harness.work / "c").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["report", "cap", "-o", "r.html"],
        ["diff", "cap", "cap", "--html", "r.html"],
    ],
    ids=["report", "diff-html"],
)
def test_a_planted_temporary_file_is_never_written_through(harness, command):
    """D4a: the old fixed temporary name ``.r.html.tmp`` planted as a symlink: the page is
    written under a random name, and the planted link and its target are left alone."""
    victim = harness.work / "victim"
    plant(harness.work / ".r.html.tmp", victim)
    result = harness.run(*command)
    harness.check(result, 0)
    assert victim.read_text() == "victim's data\n"
    assert (harness.work / ".r.html.tmp").is_symlink()
    assert "<html" in (harness.work / "r.html").read_text().lower()
    assert [p.name for p in harness.work.iterdir() if p.name.endswith(".tmp")] == [".r.html.tmp"]


def test_export_ignores_planted_temporary_names(harness):
    pytest.importorskip("pyarrow")
    (harness.work / "out").mkdir()
    victim = harness.work / "victim"
    plant(harness.work / "out" / ".ranges.parquet.tmp", victim)
    result = harness.run("export", "cap", "-o", "out")
    harness.check(result, 0)
    assert victim.read_text() == "victim's data\n"
    assert (harness.work / "out" / "ranges.parquet").stat().st_size > 0


def test_merge_refuses_a_manifest_path_that_leaves_the_capture(harness):
    """D4b: ``html.path = "../../../secret/id_rsa"`` in an input's manifest."""
    secret = harness.work / "secret"
    secret.mkdir()
    (secret / "id_rsa").write_text("PRIVATE KEY\n")
    another_capture(harness)
    record = json.loads((harness.work / "other" / "manifest.json").read_text())
    record["processes"][0]["artifacts"]["html"]["path"] = "../secret/id_rsa"
    (harness.work / "other" / "manifest.json").write_text(json.dumps(record))
    result = harness.run("merge", "out", "cap", "other")
    harness.check(result, 2, "leads outside the capture")
    assert not (harness.work / "out").exists()
    assert sorted(p.name for p in secret.iterdir()) == ["id_rsa"]


def test_merge_refuses_a_symlinked_artifact_that_leaves_the_capture(harness):
    """D4b: the path is plain, but the file is a symlink to a file outside the capture."""
    (harness.work / "secret").write_text("PRIVATE KEY\n")
    another_capture(harness)
    html = next((harness.work / "other").glob("*.html"))
    html.unlink()
    html.symlink_to(harness.work / "secret")
    result = harness.run("merge", "out", "cap", "other")
    harness.check(result, 2, "leads outside the capture")
    assert not (harness.work / "out").exists()


SQL_ESCAPES = [
    ("read_blob", "SELECT * FROM read_blob('{victim}')"),
    ("read_csv", "SELECT * FROM read_csv('{victim}')"),
    ("copy", "COPY (SELECT 1) TO '{work}/written.csv'"),
    ("attach", "ATTACH '{work}/db.duckdb'"),
    ("install", "INSTALL httpfs"),
    ("unlock", "SET enable_external_access = true"),
]


@pytest.mark.parametrize("query", [q[1] for q in SQL_ESCAPES], ids=[q[0] for q in SQL_ESCAPES])
def test_sql_is_confined_to_the_tables(harness, query):
    """D7: DuckDB reads and writes no file, attaches nothing, installs nothing."""
    pytest.importorskip("duckdb")
    (harness.work / "victim").write_text("secret\n")
    before = sorted(p.name for p in harness.work.iterdir())
    result = harness.run("sql", "cap", query.format(victim=harness.work / "victim", work=harness.work))
    harness.check(result, 2, "the query failed")
    assert "--allow-files" in result.stderr
    assert "secret" not in result.stdout
    assert sorted(p.name for p in harness.work.iterdir()) == before


def test_sql_allow_files_opts_out(harness):
    pytest.importorskip("duckdb")
    query = f"COPY (SELECT count(*) AS n FROM ranges) TO '{harness.work / 'n.csv'}'"
    result = harness.run("sql", "--allow-files", "cap", query)
    harness.check(result, 0)
    assert (harness.work / "n.csv").read_text().splitlines() == ["n", "1"]
    ok = harness.run("sql", "cap", "SELECT count(*) AS n FROM ranges", "--format", "csv")
    harness.check(ok, 0)
    assert ok.stdout.splitlines() == ["n", "1"]


def test_export_into_a_folder_named_tilde(harness, tmp_path_factory):
    """D8: ``-o '~'`` is a folder named ``~`` in the working directory, never $HOME."""
    pytest.importorskip("pyarrow")
    home = tmp_path_factory.mktemp("home")
    result = harness.run("export", "cap", "-o", "~", env={"HOME": str(home)})
    harness.check(result, 0)
    assert sorted(p.name for p in (harness.work / "~").iterdir()) == sorted(
        f"{t}.parquet" for t in TABLE_NAMES
    )
    assert list(home.iterdir()) == []


def test_export_that_fails_leaves_no_temporary_file(harness):
    """D8: a write refused midway (a file size limit: EFBIG) leaves nothing behind."""
    pytest.importorskip("pyarrow")
    out = harness.work / "out"
    out.mkdir()
    cmd = [sys.executable, "-m", "iket_cli", "export", str(FIXTURES / "multi"), "-o", str(out)]

    def small_files():
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (1500, 1500))

    done = subprocess.run(
        cmd, cwd=harness.work, env=harness.env(), capture_output=True, text=True, preexec_fn=small_files
    )
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert sum(line.startswith("iket: error:") for line in done.stderr.splitlines()) == 1, done.stderr
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


FOOTGUNS = [
    ("report over the manifest", ["report", "cap", "-o", "cap/manifest.json"], "is a file of the capture"),
    ("report over an artifact", ["report", "cap", "-o", f"cap/{AFFINE_TRACE}"], "is a file of the capture"),
    (
        "diff html over an input",
        ["diff", "cap", f"cap/{AFFINE_TRACE}", "--html", f"cap/{AFFINE_TRACE}"],
        "which this command reads",
    ),
    ("diff html over the log", ["diff", "cap", "cap", "--html", "cap/iket.log"], "is a file of the capture"),
    (
        "merge over an input",
        ["merge", "cap", "cap", "other", "--clobber"],
        "the merge would replace what it reads",
    ),
    ("export into /", ["export", "cap", "-o", "/"], "is the root directory"),
]


@pytest.mark.parametrize(("args", "message"), [f[1:] for f in FOOTGUNS], ids=[f[0] for f in FOOTGUNS])
def test_outputs_that_would_overwrite_what_a_command_reads(harness, args, message):
    """D21: each refused with exit 2, nothing changed."""
    another_capture(harness)
    before = snapshot(harness.work)
    result = harness.run(*args)
    harness.check(result, 2, message)
    assert snapshot(harness.work) == before


def test_a_new_report_inside_the_capture_is_fine(harness):
    result = harness.run("report", "cap", "-o", "cap/mine.html")
    harness.check(result, 0, previous=False)
    assert manifest.read(harness.work / "cap")["status"] == "ok"


def _toml(harness, extra: str) -> None:
    (harness.work / "iket.toml").write_text(
        f'run_iket = "{harness.double}"\n{extra}\n[[jobs]]\nname = "a"\ntarget = "w.py:workload"\n'
    )


def test_iket_run_refuses_the_root_directory_as_its_output_root(harness):
    _toml(harness, 'output = "/"')
    result = harness.run("run")
    harness.check(result, 2, "is the root directory")


def test_iket_run_refuses_junit_over_a_capture_s_file(harness):
    _toml(harness, 'output = "runs"')
    harness.check(harness.run("run"), 0)
    before = snapshot(harness.work / "runs" / "a")
    result = harness.run("run", "--junit", "runs/a/manifest.json")
    harness.check(result, 2, "is a file of the capture")
    assert snapshot(harness.work / "runs" / "a") == before


def test_iket_run_refuses_a_job_named_like_the_run_manifest(harness):
    (harness.work / "iket.toml").write_text(
        f'run_iket = "{harness.double}"\noutput = "runs"\n'
        '[[jobs]]\nname = "run-manifest.json"\ntarget = "w.py:workload"\n'
    )
    result = harness.run("run")
    harness.check(result, 2, "is not a plain folder name")
    assert not (harness.work / "runs").exists()


def test_a_folder_and_its_alias_take_one_lock(harness):
    """D13: a decode of ``alias`` (a symlink to DIR) while DIR is locked, and the other way
    round: each is refused at once as locked (the lock was named after the path given, so
    both ran on one folder and both failed)."""
    kept = harness.work / "kept"
    shutil.copytree(FIXTURES / "multi", kept)
    for name in os.listdir(kept):
        if name.startswith("iket_pid_"):
            (kept / name).unlink()
    (harness.work / "alias").symlink_to(kept)
    before = snapshot(kept)
    for held, given in ((kept, "alias"), (harness.work / "alias", "kept")):
        with outdir.Lock(held):
            result = harness.run("postprocess", given, "--format", "json")
        harness.check(result, 2, "another iket command is using")
        assert snapshot(kept) == before
    harness.check(harness.run("postprocess", "alias", "--format", "json"), 0)
    assert manifest.read(kept)["status"] == "ok"
