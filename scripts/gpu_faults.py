"""Faults in the middle of a real capture pass on the GPU: ``python -m pytest -m gpu scripts/gpu_faults.py``.

The workload launches the instrumented affine kernel (so it holds the GPU), then, in the
capture pass only, sleeps. In that sleep the CLI gets SIGINT or SIGTERM (to its process
group, as a terminal sends them), times out, or is killed with SIGKILL, alone (its watchdog
cleans up) or with its watchdog (the next capture cleans up). Each case checks: the exit
code, no traceback, no process left on the GPU (``nvidia-smi --query-compute-apps``), the
previous capture byte-identical, no staging folder or lock left. Skipped without a GPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
    pytest.mark.skipif(importlib.util.find_spec("tvm_tirx") is None, reason="TIRx is not installed"),
]
HELD = (
    "import os, time\n"
    "import profile_affine as p\n"
    "p.workload()\n"
    "if os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json'):\n"
    "    print('capture pass holds the GPU', flush=True)\n"
    "    time.sleep(300)\n"
)


def gpu_apps() -> list[str]:
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


def settled(seconds: float = 20) -> list[str]:
    """The GPU's compute processes once the killed ones are gone (or what is left after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while (apps := gpu_apps()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return apps


def snapshot(folder: Path) -> dict:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def leftovers(work: Path) -> list[str]:
    return [p.name for p in work.iterdir() if ".iket-staging-" in p.name or p.name.endswith(".iket.lock")]


def keep_text(name: str, text: str) -> None:
    out = os.environ.get("IKET_GPU_KEEP")
    if out:
        (Path(out) / name).write_text(text)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples" / "profile_affine.py", tmp_path / "profile_affine.py")
    (tmp_path / "held.py").write_text(HELD)
    made = iket("profile", "profile_affine.py:workload", "-o", "cap", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert settled() == [], "the GPU is free before the fault"
    return tmp_path


def iket(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "iket_cli", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


class Running:
    """The CLI in a session of its own, its output read by two threads."""

    def __init__(self, work: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "iket_cli", *args],
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [
            threading.Thread(target=lambda s=s, i=i: i.extend(iter(s.readline, "")), daemon=True)
            for s, i in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for reader in self.readers:
            reader.start()

    def wait_for(self, text: str, seconds: float = 180) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.proc.poll() is None:
            if any(text in line for line in self.out + self.err):
                return
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never came: {''.join(self.err)[-2000:]}")

    def finish(self) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=120)
        for reader in self.readers:
            reader.join(30)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code, "".join(self.out), "".join(self.err)


def descendants(pid: int) -> list[int]:
    sys.path.insert(0, str(ROOT))
    from iket_cli.system import tree

    return tree.descendants(pid)


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_mid_capture_pass(work, signum):
    before = snapshot(work / "cap")
    running = Running(work, "profile", "held.py", "--clobber", "-o", "cap")
    running.wait_for("capture pass holds the GPU")
    assert gpu_apps(), "the workload holds the GPU"
    os.killpg(running.proc.pid, signum)
    code, out, err = running.finish()
    keep_text(f"fault-{signal.Signals(signum).name}.stderr", err)
    assert code == 128 + signum, err
    assert "Traceback" not in out + err
    assert settled() == [], "nothing left on the GPU"
    assert snapshot(work / "cap") == before
    assert json.loads((work / "cap.failed" / "manifest.json").read_text())["status"] == "interrupted"
    assert leftovers(work) == []


def test_a_timeout_mid_capture_pass(work):
    before = snapshot(work / "cap")
    start = time.monotonic()
    proc = iket("profile", "held.py", "--clobber", "-o", "cap", "--timeout", "45", cwd=work)
    keep_text("fault-timeout.stderr", proc.stderr)
    assert proc.returncode == 124, proc.stderr
    assert time.monotonic() - start < 120
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "capture pass holds the GPU" in (work / "cap.failed" / "iket.log").read_text(), "mid capture pass"
    assert settled() == []
    assert snapshot(work / "cap") == before and leftovers(work) == []


def test_kill_9_of_the_cli_mid_capture_pass(work):
    before = snapshot(work / "cap")
    running = Running(work, "profile", "held.py", "--clobber", "-o", "cap")
    running.wait_for("capture pass holds the GPU")
    running.proc.kill()
    running.finish()
    assert settled() == [], "the watchdog stopped the workload: nothing left on the GPU"
    assert snapshot(work / "cap") == before
    record = json.loads((work / "cap.failed" / "manifest.json").read_text())
    keep_text("fault-kill9.manifest.json", json.dumps(record, indent=2))
    assert record["error"]["type"] == "CaptureKilled"
    assert sorted(p.name for p in (work / "cap.failed").iterdir()) == ["iket.log", "manifest.json"]
    assert leftovers(work) == []


def test_kill_9_of_cli_and_watchdog_is_cleaned_by_the_next_capture(work):
    before = snapshot(work / "cap")
    running = Running(work, "profile", "held.py", "--clobber", "-o", "cap")
    running.wait_for("capture pass holds the GPU")
    watchdog = [p for p in descendants(running.proc.pid) if b"capture.watchdog" in cmdline(p)]
    assert watchdog
    for pid in (running.proc.pid, *watchdog):
        os.kill(pid, signal.SIGKILL)
    running.finish()
    time.sleep(2)
    assert gpu_apps(), "the workload outlived the CLI and its watchdog: it still holds the GPU"
    assert snapshot(work / "cap") == before
    assert any(".iket-staging-" in name for name in leftovers(work))
    proc = iket("profile", "profile_affine.py:workload", "--clobber", "-o", "cap", cwd=work)
    keep_text("fault-kill9-all-next-run.stderr", proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert "removed .cap.iket-staging-" in proc.stderr and "stopped its" in proc.stderr
    assert settled() == [], "the next capture stopped what was left on the GPU"
    assert leftovers(work) == []
