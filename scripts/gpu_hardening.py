"""Issue 31's faults on the real stack (TIRx + run-iket on the GPU):
``python -m pytest -m gpu scripts/gpu_hardening.py``.

Each workload launches the instrumented affine kernel, so every capture is a real one; what
the CPU tests show with the run-iket double is checked here with NVIDIA's tool: SIGHUP in
the capture pass (D17), a detached helper without environment (D11, D12), the CLI's input
forwarded to the capture pass (D19), ``PYTHONWARNINGS=error`` (D23), a closed stdout with a
chatty workload (D10), a corrupt raw capture decoded (D1) and the export of the capture
(D8, D22). Skipped without a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers of gpu_faults.py beside it
from gpu_faults import ROOT, Running, cmdline, iket, keep_text, leftovers, pytestmark, settled, snapshot

__all__ = ["pytestmark"]

KERNEL = "import profile_affine as p\np.workload()\n"
CAPTURE_PASS = "os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json')"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples" / "profile_affine.py", tmp_path / "profile_affine.py")
    return tmp_path


def _alive(tag: str) -> list[int]:
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return [pid for pid in pids if tag.encode() in cmdline(pid)]


def test_sighup_in_a_real_capture_pass_is_129_and_keeps_the_previous(work):
    (work / "held.py").write_text(
        f"import os, time\n{KERNEL}if {CAPTURE_PASS}:\n"
        "    print('capture pass holds the GPU', flush=True)\n    time.sleep(300)\n"
    )
    made = iket("profile", "profile_affine.py:workload", "-o", "cap", cwd=work)
    assert made.returncode == 0, made.stderr
    before = snapshot(work / "cap")
    running = Running(work, "profile", "held.py", "-o", "cap", "--clobber")
    running.wait_for("capture pass holds the GPU")
    os.killpg(running.proc.pid, signal.SIGHUP)  # an ssh connection dropped
    code, _, err = running.finish()
    keep_text("hardening_sighup.err", err)
    assert code == 129, err
    assert "Traceback" not in err and "SIGHUP" in err
    assert snapshot(work / "cap") == before
    assert settled() == [] and leftovers(work) == []


def test_a_detached_envless_helper_neither_holds_the_pass_nor_survives(work):
    (work / "helper.py").write_text(
        f"import os, subprocess, sys\n{KERNEL}if {CAPTURE_PASS}:\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)  # iket-gpu-helper'],\n"
        "                     start_new_session=True, env={})\n"
        "print('workload done', flush=True)\n"
    )
    start = time.monotonic()
    done = iket("profile", "helper.py", "-o", "cap", "--timeout", "150", cwd=work)
    took = time.monotonic() - start
    keep_text("hardening_helper.err", done.stderr)
    assert done.returncode == 0, done.stderr
    assert took < 90, f"the pass waited for the helper ({took:.0f} s)"
    assert json.loads((work / "cap" / "manifest.json").read_text())["status"] == "ok"
    deadline = time.monotonic() + 15
    while _alive("iket-gpu-helper") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive("iket-gpu-helper") == []


def test_the_input_reaches_the_capture_pass(work):
    (work / "reader.py").write_text(
        f"import os, sys\n{KERNEL}data = sys.stdin.read()\n"
        f"print('capture' if {CAPTURE_PASS} else 'tracker', 'read', repr(data), flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "iket_cli", "profile", "reader.py", "-o", "cap"],
        cwd=work,
        input="hi from the terminal\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    keep_text("hardening_stdin.out", done.stdout + done.stderr)
    assert done.returncode == 0, done.stderr
    assert "capture read 'hi from the terminal\\n'" in done.stdout
    assert "tracker read ''" in done.stdout


def test_pythonwarnings_error_captures(work):
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    done = subprocess.run(
        [sys.executable, "-m", "iket_cli", "profile", "profile_affine.py:workload", "-o", "cap"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    keep_text("hardening_warnings.err", done.stderr)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_a_closed_stdout_does_not_block_a_chatty_workload(work):
    (work / "chatty.py").write_text(f"{KERNEL}for n in range(20000):\n    print('line', n, 'x' * 40)\n")
    done = subprocess.run(
        f"{sys.executable} -m iket_cli profile chatty.py -o cap >&-",
        shell=True,
        cwd=work,
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    keep_text("hardening_closed_stdout.err", done.stderr)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "line 19999" in (work / "cap" / "iket.log").read_text()


def test_a_corrupt_raw_capture_is_one_line_and_kept(work):
    made = iket("profile", "profile_affine.py:workload", "-o", "cap", "--keep", cwd=work)
    assert made.returncode == 0, made.stderr
    raw = next((work / "cap" / "iket").glob("pid_*")) / "iket.data.json"
    doc = json.loads(raw.read_text())
    doc["meta"]["version"] = 9
    raw.write_text(json.dumps(doc))
    done = iket("postprocess", "cap", "--format", "json", cwd=work)
    keep_text("hardening_corrupt_raw.err", done.stderr)
    assert done.returncode in (1, 2), done.stderr
    assert "Traceback" not in done.stderr
    assert sum(line.startswith("iket: error:") for line in done.stderr.splitlines()) == 1
    assert raw.is_file() and leftovers(work) == []


def test_the_export_of_a_real_capture(work):
    pytest.importorskip("pyarrow")
    made = iket("profile", "profile_affine.py:workload", "-o", "cap", cwd=work)
    assert made.returncode == 0, made.stderr
    done = iket("export", "cap", "-o", "tables", cwd=work)
    assert done.returncode == 0, done.stderr
    import pyarrow.parquet as pq

    trace = json.loads(next((work / "cap").glob("*.trace.json")).read_text())
    ranges = sum(len(x["ranges"]) for x in trace["launches"])
    assert pq.read_table(work / "tables" / "ranges.parquet").num_rows == ranges
    assert not [p.name for p in (work / "tables").iterdir() if p.name.endswith(".tmp")]
