"""Signals in the middle of a capture pass and of a decode: Ctrl-C, SIGTERM, a timeout, kill -9."""

from __future__ import annotations

import json
import signal
import tarfile
import time

import pytest

from iket_cli.model import manifest
from iket_cli.system import tree

from conftest import FIXTURES, cmdline, snapshot


def start_slow(harness, *extra):
    started = harness.start(
        "profile", "--run-iket", harness.double, "--clobber", "-o", "cap", *extra, "slow.py"
    )
    started.wait_for("capture pass started")
    return started


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_mid_capture_pass(harness, signum):
    started = start_slow(harness)
    harness.terminal_signal(started, signum)
    result = started.finish()
    name = signal.Signals(signum).name
    harness.check(result, 128 + signum, f"interrupted by {name}; the whole process tree was stopped")
    failed = manifest.read(harness.work / "cap.failed")
    assert failed["status"] == "interrupted" and failed["error"]["exit_code"] == 128 + signum
    assert "Exception in thread" not in result.stderr, "the output readers stop cleanly"
    assert "capture pass started" in (harness.work / "cap.failed" / "iket.log").read_text()


def test_a_timeout_mid_capture_pass(harness):
    start = time.monotonic()
    result = harness.profile("--clobber", "-o", "cap", "--timeout", "4", "slow.py")
    harness.check(result, 124, "timed out after 4 s; the whole process tree was killed")
    assert time.monotonic() - start < 40
    assert manifest.read(harness.work / "cap.failed")["status"] == "timeout"


def test_kill_9_of_the_cli_mid_capture_pass(harness):
    """The watchdog stops run-iket, the shim and the workload, keeps the log, removes the rest."""
    started = start_slow(harness)
    workload = [p for p in tree.descendants(started.proc.pid)]
    assert workload, "the capture's processes run"
    started.proc.kill()  # SIGKILL to the CLI alone: nothing of it runs any more
    result = started.finish()
    assert result.code == -signal.SIGKILL
    harness.assert_nothing_left()
    assert snapshot(harness.work / "cap") == harness.before
    failed = manifest.read(harness.work / "cap.failed")
    assert failed["status"] == "interrupted" and failed["error"]["type"] == "CaptureKilled"
    assert failed["error"]["exit_code"] == 137
    kept = sorted(p.name for p in (harness.work / "cap.failed").iterdir())
    assert kept == ["iket.log", "manifest.json"], "the log and the record; the raw capture is dropped"


def test_kill_9_of_everything_is_cleaned_by_the_next_capture(harness):
    """A whole job killed at once (a preemption): the CLI and its watchdog die with it. The next
    capture into DIR stops what survived and removes the staging folder, and says so."""
    started = start_slow(harness)
    watchdog = [p for p in tree.descendants(started.proc.pid) if b"capture.watchdog" in cmdline(p)]
    assert watchdog, "a watchdog guards the capture"
    survivors = [p for p in tree.descendants(started.proc.pid) if p not in watchdog]
    # the watchdog first: killed second, it could see the CLI die and clean up in between
    for pid in (*watchdog, started.proc.pid):
        tree.os.kill(pid, signal.SIGKILL)
    started.finish()
    time.sleep(0.5)
    assert any(tree.start_time(p) is not None for p in survivors), "the workload outlived the CLI"
    assert list(harness.work.glob(".cap.iket-staging-*")), "the staging folder was left"
    result = harness.profile("--clobber", "-o", "cap", "w.py:workload")
    harness.check(result, 0, previous=False)
    assert "removed .cap.iket-staging-" in result.stderr and "that was killed" in result.stderr
    assert "stopped its" in result.stderr
    assert manifest.read(harness.work / "cap")["status"] == "ok"


def test_ctrl_c_of_iket_run_stops_every_job(harness):
    (harness.work / "iket.toml").write_text(
        f'run_iket = "{harness.double}"\n'
        '[[jobs]]\nname = "one"\ntarget = "slow.py"\n'
        '[[jobs]]\nname = "two"\ntarget = "slow.py"\n'
    )
    started = harness.start("run")
    started.wait_for("[one] capture pass started")
    harness.terminal_signal(started, signal.SIGINT)
    result = started.finish()
    harness.check(result, 130, "interrupted by SIGINT: 1 job(s) not run, the running ones stopped")
    record = json.loads((harness.work / "iket-runs" / "run-manifest.json").read_text())
    assert [(job["name"], job["status"]) for job in record["jobs"]] == [("one", "interrupted")]
    harness.assert_nothing_left(harness.work / "iket-runs")


def keep256(harness):
    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(harness.work, filter="data")
    folder = harness.work / "keep256"
    return folder, sorted(p.relative_to(folder) for p in folder.rglob("*"))


def wait_for_worker(started) -> list[int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = [p for p in tree.descendants(started.proc.pid) if b"decode.worker" in cmdline(p)]
        if workers:
            return workers
        time.sleep(0.05)
    raise AssertionError("no decode worker started")


def test_ctrl_c_while_decoding_says_interrupted_not_crashed(harness):
    folder, before = keep256(harness)
    started = harness.start("postprocess", folder, "--format", "json", "-j", "1")
    wait_for_worker(started)
    time.sleep(0.3)
    harness.terminal_signal(started, signal.SIGINT)
    result = started.finish()
    harness.check(result, 130, "interrupted by SIGINT while decoding", folder=folder)
    assert "crashed" not in result.stderr and "signal 9" not in result.stderr
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before, "no half-written file"


def test_kill_9_while_decoding_leaves_nothing_the_next_decode_keeps(harness):
    folder, _ = keep256(harness)
    started = harness.start("postprocess", folder, "--format", "json", "-j", "1")
    workers = wait_for_worker(started)
    time.sleep(0.5)
    started.proc.kill()
    started.finish()
    time.sleep(0.5)
    assert all(tree.start_time(p) is None for p in workers), "the worker died with the CLI"
    # Its lock file stays (the kernel released the lock itself); the next decode reuses it.
    again = harness.run("postprocess", folder, "--format", "perfetto")
    harness.check(again, 0, folder=folder)
    after = sorted(p.name for p in folder.iterdir())
    assert not [name for name in after if name.endswith(".tmp")], "the killed decode's files are gone"
    assert not list(folder.rglob(".part*")), "and so are its launch parts"


#: Sleeps in its second capture pass (repeat 2), with a grandchild in a session of its own.
SLOW_REPEAT = (
    "import os, subprocess, sys, time\n"
    "import numpy  # so that a warm standby imports it for each repeat\n"
    "if os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json'):\n"
    "    with open('captures.txt', 'a') as f:\n"
    "        f.write('x')\n"
    "    if open('captures.txt').read() == 'xx':\n"
    "        sleeper = [sys.executable, '-c', 'import time; time.sleep(120)']\n"
    "        subprocess.Popen(sleeper, start_new_session=True)\n"
    "        print('repeat 2 started', flush=True)\n"
    "        time.sleep(120)\n"
    "print('pass done', flush=True)\n"
)


def test_ctrl_c_in_the_middle_of_a_repeat(harness):
    """--repeat 3, Ctrl-C in repeat 2: nothing published, the previous capture intact, the
    standby already importing for repeat 3 stopped, nothing left running or on disk."""
    (harness.work / "slow_repeat.py").write_text(SLOW_REPEAT)
    started = harness.start(
        "profile", "--run-iket", harness.double, "--clobber", "-o", "cap", "--repeat", "3", "slow_repeat.py"
    )
    started.wait_for("repeat 2 started")
    harness.terminal_signal(started, signal.SIGINT)
    result = started.finish()
    harness.check(result, 130, "interrupted by SIGINT")
    failed = manifest.read(harness.work / "cap.failed")
    assert failed["status"] == "interrupted"
    assert "repeat 2 started" in (harness.work / "cap.failed" / "iket.log").read_text()
