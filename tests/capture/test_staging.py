"""Staging folders: atomic publication, evidence in DIR.failed/, and what a killed capture left."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from iket_cli.capture import outdir
from iket_cli.capture import staging as staging_mod
from iket_cli.capture.staging import Staging, remove_stale
from iket_cli.system import tree

from conftest import all_gone, manifest_text


def test_publish_new_and_replace_atomically(tmp_path):
    dest = tmp_path / "cap"
    staging = Staging.create(dest)
    staging.log_path.write_text("log one")
    (staging.finalize() / "manifest.json").write_text(manifest_text())
    assert staging.publish() == dest
    assert (dest / "iket.log").read_text() == "log one"
    assert not staging.root.exists()

    second = Staging.create(dest)
    (second.finalize() / "manifest.json").write_text(manifest_text(n=2))
    second.publish()
    assert '"n": 2' in (dest / "manifest.json").read_text()
    assert not (dest / "iket.log").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["cap"]


def test_fail_replaces_previous_failure_only(tmp_path):
    dest = tmp_path / "cap"
    for n in (1, 2):
        staging = Staging.create(dest)
        staging.log_path.write_text(f"failure {n}")
        (staging.finalize() / "manifest.json").write_text(manifest_text(status="failed"))
        assert staging.fail() == tmp_path / "cap.failed"
    assert (tmp_path / "cap.failed" / "iket.log").read_text() == "failure 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap.failed"]


def test_fail_never_deletes_a_foreign_failed_folder(tmp_path):
    dest = tmp_path / "cap"
    (tmp_path / "cap.failed").mkdir()
    (tmp_path / "cap.failed" / "mine.txt").write_text("user data")
    staging = Staging.create(dest)
    assert staging.fail() is None
    assert (tmp_path / "cap.failed" / "mine.txt").read_text() == "user data"


def test_exchange_swaps(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    staging_mod._exchange(a, b)
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


def test_names_always_fit_the_file_system(tmp_path):
    """A legal 248-byte name (255 minus '.failed') gets a lock and a staging folder, both hidden."""
    dest = tmp_path / ("n" * 248)
    lock = outdir.hidden(dest, outdir.LOCK_SUFFIX)
    with outdir.Lock(dest), Staging.create(dest) as staging:
        assert staging.root.exists() and staging.root.name.startswith(".")
        assert len(staging.root.name.encode()) <= 255 and lock.exists()
        (staging.finalize() / "manifest.json").write_text(manifest_text(status="failed"))
        assert staging.fail() == tmp_path / (dest.name + ".failed")
    assert not lock.exists()
    other = outdir.hidden(tmp_path / ("n" * 247 + "m"), outdir.LOCK_SUFFIX)
    assert other != lock, "two long names that share a prefix get two lock files"


def test_stale_staging_of_a_dead_owner_is_removed_and_its_processes_stopped(tmp_path):
    dest = tmp_path / "cap"
    stale = Staging.create(dest)
    (stale.root / "capture").mkdir()
    (stale.root / "capture" / "raw.bin").write_bytes(b"x" * 1000)
    owner = json.loads((stale.root / staging_mod.OWNER_NAME).read_text())
    (stale.root / staging_mod.OWNER_NAME).write_text(json.dumps({**owner, "started": -1}))  # not us
    marked = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        env={**os.environ, tree.MARK_ENV: stale.token},
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    # Popen returns as exec starts; /proc/PID/environ reads empty until the new program is set up
    assert marked.stdout.readline() == b"up\n"
    try:
        (found,) = remove_stale(dest)
        assert found.root == stale.root and found.bytes >= 1000 and found.killed == [marked.pid]
        assert not stale.root.exists()
        assert all_gone([marked.pid])
    finally:
        marked.kill()
        marked.wait()
        marked.stdout.close()


def test_staging_of_a_live_owner_is_kept(tmp_path):
    dest = tmp_path / "cap"
    with Staging.create(dest) as live:
        assert remove_stale(dest) == [] and live.root.exists()
    assert not live.root.exists()
