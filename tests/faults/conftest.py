"""The fault-injection harness: the real CLI, a previous capture, and the promise checked.

Every fault test runs ``python -m iket_cli`` (in a session of its own when it is signalled,
as a terminal's foreground job is) with a marker in its environment that every process it
starts inherits, and then checks, through :meth:`Harness.check`:

* the exit code, and exactly one ``iket: error:`` line (none for a success);
* no ``Traceback`` on stdout or stderr;
* the previous capture in ``cap/`` byte-identical;
* no process of the run alive (``/proc/*/environ`` walked for the marker);
* no staging folder and no lock file left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import FIXTURES, Result, snapshot

MARK = "IKET_FAULT_SUITE"
LOCK = ".iket.lock"
#: Seconds a killed process may take to be gone (SIGKILL is asynchronous; the watchdog polls).
SETTLE_S = 10.0

#: A workload that sleeps in the capture pass (the double runs it in both passes).
#: A workload that sleeps in the capture pass (the double runs it in both passes), beside a
#: child of its own in a session of its own: a tree that a process-group kill alone misses.
SLOW = (
    "import os, subprocess, sys, time\n"
    "if os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json'):\n"
    "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
    "    print('capture pass started', flush=True)\n"
    "    time.sleep(120)\n"
    "print('tracker pass done', flush=True)\n"
)


def marked_processes(token: str) -> list[int]:
    """Live processes (not zombies) whose environment carries this run's marker."""
    needle = f"{MARK}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as handle:
                if handle.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


@dataclass
class Started:
    """A CLI running in the background, its output collected by two reader threads."""

    proc: subprocess.Popen
    args: list
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)

    readers: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            reader = threading.Thread(target=lambda s=stream, i=into: i.extend(iter(s.readline, "")))
            reader.daemon = True
            reader.start()
            self.readers.append(reader)

    def wait_for(self, text: str, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(text in line for line in [*self.out, *self.err]):
                return
            if self.proc.poll() is not None:
                time.sleep(0.2)
                break
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared:\n{''.join(self.out)}\n{''.join(self.err)}")

    def finish(self, seconds: float = 60) -> Result:
        code = self.proc.wait(timeout=seconds)
        for reader in self.readers:  # they drain what is left, up to the end of each pipe
            reader.join(seconds)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return Result(code, "".join(self.out), "".join(self.err), self.args)


class Harness:
    """One fault test's working directory, previous capture and marker."""

    def __init__(self, work: Path, double: Path, previous: Path) -> None:
        self.work = work
        self.double = double
        self.token = uuid.uuid4().hex
        shutil.copytree(previous, work / "cap")
        self.before = snapshot(work / "cap")
        (work / "w.py").write_text("KEYS = ()\n\n\ndef workload():\n    print('workload ran')\n")
        (work / "slow.py").write_text(SLOW)

    def env(self, extra: dict | None = None) -> dict:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_INJECTION64_PATH"}
        env.update({MARK: self.token, "IKET_DOUBLE_CAPTURE": str(FIXTURES / "affine")})
        env.update(extra or {})
        return env

    def command(self, args) -> list[str]:
        return [sys.executable, "-m", "iket_cli", *map(str, args)]

    def run(self, *args, env: dict | None = None, cwd: Path | None = None, timeout: float = 120) -> Result:
        cmd = self.command(args)
        proc = subprocess.run(
            cmd,
            cwd=cwd or self.work,
            env=self.env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr, cmd)

    def start(self, *args, env: dict | None = None, cwd: Path | None = None) -> Started:
        """The CLI in a session of its own: signals go to its process group, as a terminal's do."""
        cmd = self.command(args)
        proc = subprocess.Popen(
            cmd,
            cwd=cwd or self.work,
            env=self.env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        return Started(proc, cmd)

    def terminal_signal(self, started: Started, signum: int) -> None:
        """What a terminal does on Ctrl-C: the signal to the foreground process group."""
        os.killpg(started.proc.pid, signum)

    def profile(self, *args, env: dict | None = None) -> Result:
        return self.run("profile", "--run-iket", self.double, *args, env=env)

    def check(
        self,
        result: Result,
        code: int,
        message: str | None = None,
        *,
        previous: bool = True,
        folder: Path | None = None,
        others_running: bool = False,
    ) -> None:
        """The promise, for one finished run (see the module's docstring); with
        ``others_running``, another run of the test is still going, so its processes and
        lock are not this one's leftovers."""
        assert result.code == code, result
        for stream in (result.stdout, result.stderr):
            assert "Traceback" not in stream, result
        errors = [line for line in result.stderr.splitlines() if line.startswith("iket: error:")]
        if code == 0:
            assert errors == [], result
        else:
            assert len(errors) == 1, result
            if message is not None:
                assert message in errors[0], result
        if previous:
            assert snapshot(self.work / "cap") == self.before, "the previous capture changed"
        if not others_running:
            self.assert_nothing_left(folder)

    def assert_nothing_left(self, folder: Path | None = None) -> None:
        deadline = time.monotonic() + SETTLE_S
        while (alive := marked_processes(self.token)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive == [], f"processes of the run still alive: {alive}"
        for where in {self.work, folder or self.work}:
            leftovers = [
                p.name for p in where.iterdir() if ".iket-staging-" in p.name or p.name.endswith(".iket.lock")
            ]
            assert leftovers == [], f"left on disk in {where}: {leftovers}"

    def kill_all(self) -> None:
        """Whatever of this run is still alive: SIGKILL (cleanup after a failed assertion)."""
        for pid in marked_processes(self.token):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _mount_tmpfs(where, size: str) -> bool:
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "2m"):
        pytest.skip("a 2 MB tmpfs cannot be mounted here (needs root and mount rights)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.fixture(scope="session")
def previous(tmp_path_factory, double) -> Path:
    """A real capture made by iket profile (the double replays the affine H200 capture)."""
    work = tmp_path_factory.mktemp("previous")
    (work / "w.py").write_text("def workload():\n    pass\n")
    env = {**os.environ, "IKET_DOUBLE_CAPTURE": str(FIXTURES / "affine")}
    env.pop("CUDA_INJECTION64_PATH", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "iket_cli",
            "profile",
            "--run-iket",
            str(double),
            "-o",
            "cap",
            "w.py:workload",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return work / "cap"


@pytest.fixture
def harness(tmp_path, double, previous):
    made = Harness(tmp_path, double, previous)
    yield made
    made.kill_all()
