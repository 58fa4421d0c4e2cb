"""Hangs, leaks and signals (issue 31: D11, D12, D14, D17, D18, D19), through the real CLI:
a detached helper holding the output pipe, a child that sheds its environment, full disks
everywhere, SIGHUP and SIGQUIT, an interrupted re-decode, and the workload's input.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile
import time

import pytest

from iket_cli.model import manifest
from iket_cli.system import tree

from conftest import FIXTURES, cmdline, snapshot

#: A workload whose capture pass leaves a helper behind in a session of its own, holding the
#: pass's output; ``{env}`` is the helper's environment.
HELPER = (
    "import os, subprocess, sys\n"
    "def workload():\n"
    "    if os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json'):\n"
    "        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(90)  # iket-helper {tag}'],\n"
    "                         start_new_session=True, env={env})\n"
    "    print('workload done', flush=True)\n"
)


def helpers(tag: str) -> list[int]:
    return [pid for pid in tree._pids() if f"iket-helper {tag}".encode() in cmdline(pid)]


def wait_gone(pids: list[int], within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while (alive := [p for p in pids if tree.start_time(p) is not None]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_a_detached_helper_does_not_hold_the_pass(harness):
    """D11: the helper holds the pass's output; the pass ends with the workload, a --timeout
    does not throw the finished capture away, and the helper is stopped with the capture."""
    (harness.work / "helper.py").write_text(HELPER.format(tag="d11", env="None"))
    start = time.monotonic()
    result = harness.profile("-o", "c", "--timeout", "40", "helper.py:workload")
    harness.check(result, 0)
    assert time.monotonic() - start < 30, "the pass waited for the helper"
    assert manifest.read(harness.work / "c")["status"] == "ok"
    assert wait_gone(helpers("d11")) == []


def test_an_iket_run_job_with_a_detached_helper_ends(harness):
    (harness.work / "helper.py").write_text(HELPER.format(tag="d11run", env="None"))
    (harness.work / "iket.toml").write_text(
        f'run_iket = "{harness.double}"\noutput = "runs"\n'
        '[[jobs]]\nname = "a"\ntarget = "helper.py:workload"\n'
    )
    result = harness.run("run", timeout=60)
    harness.check(result, 0)
    assert wait_gone(helpers("d11run")) == []


def _started_with_helper(harness, tag: str):
    (harness.work / "slowhelper.py").write_text(
        "import os, subprocess, sys, time\n"
        "if os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json'):\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(90)  # iket-helper {tag}'],\n"
        "                     start_new_session=True, env={})\n"
        "    print('capture pass started', flush=True)\n"
        "    time.sleep(120)\n"
    )
    started = harness.start(
        "profile", "--run-iket", harness.double, "--clobber", "-o", "cap", "slowhelper.py"
    )
    started.wait_for("capture pass started")
    deadline = time.monotonic() + 10
    while not helpers(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert helpers(tag), "the helper started"
    time.sleep(0.6)  # at least one record of the capture's processes (every 0.2 s)
    return started


def test_a_child_without_environment_dies_with_a_killed_cli(harness):
    """D12: ``env={}`` in a session of its own carries no marker; kill -9 of the CLI: the
    watchdog stops it all the same (by pid and start time)."""
    started = _started_with_helper(harness, "d12a")
    helper = helpers("d12a")
    started.proc.kill()
    started.finish()
    assert wait_gone(helper) == [], "the helper outlived the CLI and its watchdog"
    # the watchdog stops the processes, then keeps the evidence: on a slow machine, a moment later
    deadline = time.monotonic() + 20
    while not (harness.work / "cap.failed" / "manifest.json").is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert manifest.read(harness.work / "cap.failed")["error"]["type"] == "CaptureKilled"


def test_a_child_without_environment_is_stopped_by_the_next_capture(harness):
    """D12: the CLI and its watchdog killed together: the next capture into DIR stops it."""
    started = _started_with_helper(harness, "d12b")
    helper = helpers("d12b")
    watchdog = [p for p in tree.descendants(started.proc.pid) if b"capture.watchdog" in cmdline(p)]
    for pid in (*watchdog, started.proc.pid):
        os.kill(pid, signal.SIGKILL)
    started.finish()
    time.sleep(0.5)
    assert [p for p in helper if tree.start_time(p) is not None], "the helper survived both"
    result = harness.profile("--clobber", "-o", "cap", "w.py:workload")
    harness.check(result, 0, previous=False)
    assert wait_gone(helper) == []


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGHUP, 129), (signal.SIGQUIT, 131)], ids=["hup", "quit"]
)
def test_sighup_and_sigquit_stop_the_capture_like_sigterm(harness, signum, code):
    """D17: an ssh connection that drops (SIGHUP) or Ctrl-\\ (SIGQUIT) mid capture pass."""
    started = harness.start("profile", "--run-iket", harness.double, "--clobber", "-o", "cap", "slow.py")
    started.wait_for("capture pass started")
    harness.terminal_signal(started, signum)
    result = started.finish()
    name = signal.Signals(signum).name
    harness.check(result, code, f"interrupted by {name}; the whole process tree was stopped")
    failed = manifest.read(harness.work / "cap.failed")
    assert failed["status"] == "interrupted" and failed["error"]["exit_code"] == code


def test_sighup_outside_a_pass(harness):
    (harness.work / "iket.toml").write_text(
        f'run_iket = "{harness.double}"\noutput = "runs"\n[[jobs]]\nname = "a"\ntarget = "slow.py"\n'
    )
    started = harness.start("run")
    started.wait_for("capture pass started")
    harness.terminal_signal(started, signal.SIGHUP)
    result = started.finish()
    assert result.code == 129, result
    assert "Traceback" not in result.stderr


def _keep256(work):
    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(work, filter="data")
    return work / "keep256"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_redecode_leaves_the_folder_exactly_as_before(harness, signum):
    """D18: a folder decoded to Perfetto, then ``--format all`` interrupted once its Perfetto
    export is written (the last export: the lint and report follow): no new .pftrace or .gz,
    the manifest as it was; a one-line error either way."""
    kept = _keep256(harness.work)
    harness.check(harness.run("postprocess", kept, "--format", "perfetto", timeout=300), 0, previous=False)
    (kept / "iket_pid_0x238.pftrace").unlink()  # the next decode makes it first (0.9 s), then the JSON
    (kept / "iket_pid_0x238.pftrace.gz").unlink(missing_ok=True)
    record = json.loads((kept / "manifest.json").read_text())
    record["processes"][0]["artifacts"].pop("perfetto", None)
    (kept / "manifest.json").write_text(json.dumps(record))
    before = snapshot(kept)
    started = harness.start("postprocess", kept, "--format", "all")
    deadline = time.monotonic() + 120
    while not (kept / "iket_pid_0x238.pftrace").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (kept / "iket_pid_0x238.pftrace").exists(), "the Perfetto export was written first"
    harness.terminal_signal(started, signum)
    result = started.finish(seconds=120)
    harness.check(result, 128 + signum, f"interrupted by {signum.name}", previous=False)
    assert snapshot(kept) == before


FULL_DISK_COMMANDS = [
    ("report", ["report", "{cap}", "-o", "{disk}/r.html"]),
    ("diff html", ["diff", "{cap}", "{cap}", "--html", "{disk}/r.html"]),
    ("export", ["export", "{cap}", "-o", "{disk}/ex"]),
    ("merge", ["merge", "{disk}/m", "{cap}", "{other}", "--copy"]),
]


@pytest.mark.parametrize("args", [c[1] for c in FULL_DISK_COMMANDS], ids=[c[0] for c in FULL_DISK_COMMANDS])
def test_a_full_disk_names_its_disk_and_leaves_nothing(harness, small_disk, args):
    """D14: each names the disk that is full (not the working directory's) and leaves no
    temporary file, lock or staging folder on it."""
    if args[0] == "export":
        pytest.importorskip("pyarrow")
    other = harness.work / "other"
    shutil.copytree(harness.work / "cap", other)
    record = json.loads((other / "manifest.json").read_text())
    record["started_at"] = "2020-01-01T00:00:00.000+00:00"
    (other / "manifest.json").write_text(json.dumps(record))
    _fill(small_disk, leave=2000)
    words = [w.format(cap=harness.work / "cap", disk=small_disk, other=other) for w in args]
    before = sorted(p.name for p in small_disk.iterdir())
    result = harness.run(*words)
    harness.check(result, 1, f"no space left on the disk holding {small_disk}", folder=small_disk)
    left = sorted(p.name for p in small_disk.iterdir())
    if args[0] == "export":
        left = (
            [name for name in left if name != "ex"]
            + sorted(f"ex/{p.name}" for p in (small_disk / "ex").iterdir())
            if (small_disk / "ex").exists()
            else left
        )
        assert not any(name.endswith(".tmp") for name in left), left
    else:
        assert left == before, left


def _fill(disk, leave: int) -> None:
    free = shutil.disk_usage(disk).free
    (disk / "filler").write_bytes(b"\0" * max(0, free - leave))


def test_a_full_disk_at_zero_bytes_leaves_no_lock_or_staging(harness, small_disk):
    """D14: not even the lock's pid or the staging folder's owner record fits."""
    _fill(small_disk, leave=0)
    with open(small_disk / "filler", "ab", buffering=0) as handle:  # whatever is left
        while True:
            try:
                handle.write(b"\0" * 4096)
                handle.flush()
            except OSError:
                break
    result = harness.profile("-o", small_disk / "cap", "w.py:workload")
    assert result.code in (1, 2), result
    assert "Traceback" not in result.stderr
    assert "no space left on the disk holding" in result.stderr
    harness.assert_nothing_left(small_disk)


def test_a_full_disk_while_copying_a_cached_tracker(harness, small_disk):
    """D14: the copy of a reused tracker pass into the attempt meets a full disk: one line
    naming the disk (it printed a 777-character shutil.Error), and DIR.failed with the log."""
    shutil.copytree(harness.work / "cap", small_disk / "cap")
    warm = harness.profile("--clobber", "-o", small_disk / "cap", "w.py:workload")  # caches its tracker
    harness.check(warm, 0, previous=False, folder=small_disk)
    _fill(small_disk, leave=20_000)
    result = harness.profile("--clobber", "-o", small_disk / "cap", "w.py:workload")
    harness.check(result, 1, f"no space left on the disk holding {small_disk}", folder=small_disk)
    assert len(result.stderr.splitlines()[-1]) < 300
    assert (small_disk / "cap.failed" / "iket.log").is_file()


def test_the_workload_reads_the_cli_s_input_in_the_capture_pass(harness):
    """D19: ``echo hi | iket profile reader.py``: the capture pass reads it (the tracker pass
    reads an empty input); script, function and command targets alike."""
    (harness.work / "reader.py").write_text(
        "import os, sys\n"
        "def workload():\n"
        "    data = sys.stdin.read()\n"
        "    capture = os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json')\n"
        "    print('capture' if capture else 'tracker', 'read', repr(data), flush=True)\n"
        "if __name__ == '__main__':\n"
        "    workload()\n"
    )
    for target in (["reader.py:workload"], ["reader.py"], ["--", "python3", "reader.py"]):
        shutil.rmtree(harness.work / "c", ignore_errors=True)
        cmd = harness.command(
            ["profile", "--run-iket", harness.double, "--tracker", "fresh", "-o", "c", *target]
        )
        done = subprocess.run(
            cmd, cwd=harness.work, env=harness.env(), input="hello\nworld\n", capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert "capture read 'hello\\nworld\\n'" in done.stdout, (target, done.stdout)
        assert "tracker read ''" in done.stdout, (target, done.stdout)


def test_a_hung_nvidia_smi_wrapper_is_stopped_with_its_children(harness, tmp_path):
    """Issue 50, R3-14: an ``nvidia-smi`` that is a wrapper script whose child hangs holding the
    pipes: the query gives up after its bound, kills the wrapper's whole group, and ``iket
    doctor`` ends in time with nothing of it left running."""
    from iket_cli.system.machine import NVIDIA_SMI_TIMEOUT_S

    folder = tmp_path / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\nsleep 300\necho never\n")
    smi.chmod(0o755)
    started = time.monotonic()
    result = harness.run("doctor", env={"PATH": f"{folder}:{os.environ['PATH']}"}, timeout=120)
    took = time.monotonic() - started
    assert result.code in (0, 1) and "Traceback" not in result.stderr, result
    assert took < 2 * NVIDIA_SMI_TIMEOUT_S + 10, f"doctor took {took:.1f} s"
    harness.assert_nothing_left()


def test_a_split_export_s_estimate_counts_the_join(tmp_path, harness):
    """Issue 50, R3-12: a split Perfetto export holds its parts and the joined file at once; the
    full disk's message says about twice the artifact, not the artifact alone."""
    import re

    disk = tmp_path / "disk40"
    disk.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], capture_output=True
        ).returncode
    ):
        pytest.skip("a tmpfs cannot be mounted here (needs root and mount rights)")
    try:
        with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
            archive.extractall(disk, filter="data")
        result = harness.run("postprocess", disk / "keep256", "--format", "perfetto", timeout=300)
        assert result.code == 1 and "Traceback" not in result.stderr, result
        needed = re.search(r"it needs about ([\d.]+) MiB", result.stderr)
        assert needed and float(needed.group(1)) >= 2 * 67, result
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
