"""The README's first command ends with ``python scripts/demo.py``: run it as a user would,
so it cannot rot, and check that it leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def test_the_demo_captures_shows_and_cleans_up(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    env.pop("CUDA_INJECTION64_PATH", None)
    done = subprocess.run(
        [sys.executable, "scripts/demo.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert '"status": "ok"' in out and '"mode": "instrumented"' in out
    assert "the workload runs twice" in out
    assert "profiled_affine_kernel" in out and "affine" in out and "mark loaded" in out
    assert "1 launch · 1 range · 1 mark" in out
    assert list(scratch.iterdir()) == [], "the demo removes its temporary folder"


def test_the_demo_keeps_its_capture_when_asked(tmp_path):
    done = subprocess.run(
        [sys.executable, "scripts/demo.py", "--keep", str(tmp_path / "kept")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "kept" / "manifest.json").is_file()
    assert (tmp_path / "kept" / "iket_pid_0x204.html").is_file()
