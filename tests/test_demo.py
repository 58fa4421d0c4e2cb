"""The README's first command ends with ``python scripts/demo.py``: run it as a user would,
so it cannot rot, and check that it leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def test_the_demo_captures_shows_keeps_its_capture_and_cleans_up(tmp_path):
    """As the README runs it (from the folder the user is in): the capture kept in ./iket-demo,
    the README's reading commands work on it as written, no scratch file is left."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    env.pop("CUDA_INJECTION64_PATH", None)
    demo = [sys.executable, str(ROOT / "scripts" / "demo.py")]
    done = subprocess.run(demo, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert '"status": "ok"' in out and '"mode": "instrumented"' in out
    assert "the workload runs twice" in out
    assert "profiled_affine_kernel" in out and "affine" in out and "mark loaded" in out
    assert "1 launch · 1 range · 1 mark" in out
    assert "The capture is kept in iket-demo/: iket show iket-demo" in out
    assert list(scratch.iterdir()) == [], "the demo removes its scratch folder"
    shown = subprocess.run([sys.executable, "-m", "iket_cli", "show", "iket-demo"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert shown.returncode == 0 and "affine" in shown.stdout, shown.stderr
    again = subprocess.run(demo, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, "a second demo replaces its own capture"


def test_the_demo_writes_where_asked(tmp_path):
    done = subprocess.run(
        [sys.executable, "scripts/demo.py", "-o", str(tmp_path / "kept")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "kept" / "manifest.json").is_file()
    assert (tmp_path / "kept" / "iket_pid_0x204.html").is_file()


def test_the_windows_demo_shows_a_window_a_cell_and_pytest_on_a_cpu(tmp_path):
    """``scripts/demo_windows.py``: the in-process surfaces against the session's stand-in."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_windows.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "== %%iket in an IPython shell" in out and "the cell ran" in out and "affine" in out
    assert "1 failed, 1 passed" in out and "iket gate: 1 of 1 limit(s) exceeded" in out
    kept = tmp_path / "iket-demo-windows"
    assert (kept / "script" / "manifest.json").is_file() and (kept / "cell" / "manifest.json").is_file()
    assert len(list((kept / "caps").glob("*/manifest.json"))) == 2
