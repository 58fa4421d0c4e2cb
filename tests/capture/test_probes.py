"""``iket doctor --gpu``'s probes, through the real run-iket on this CPU machine.

A probe that aborts is killed inside run-iket as the bf16 GEMM is on the H200 (SIGABRT, no
Python error); one that ends is a survivor; one that fails otherwise is said with run-iket's
last line; one that hangs is stopped with its whole tree. The GPU's own table is checked on
the H200 (scripts/gpu_doctor.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from iket_cli.capture import probes
from iket_cli.system import toolchain

from conftest import alive, run_iket


@pytest.fixture
def tool() -> toolchain.RunIket:
    return toolchain.find(None, dict(os.environ))


@pytest.mark.parametrize(
    ("code", "verdict", "detail"),
    [
        ("import os\nos.abort()\n", probes.KILLED, "status -6 (SIGABRT)"),
        ("x = 1\n", probes.SURVIVES, "ran to its end"),
        ("raise SystemExit(3)\n", probes.FAILED, "Tracker failed with return code: 3"),
    ],
    ids=["abort", "ends", "fails"],
)
def test_a_probe_s_verdict(tool, tmp_path, code, verdict, detail):
    found = probes._probe("p", code, tool, dict(os.environ), sys.executable, tmp_path / "p")
    assert found.verdict == verdict and detail in found.detail, found


def test_a_hanging_probe_is_stopped_with_its_tree(tool, tmp_path, monkeypatch):
    monkeypatch.setattr(probes, "PROBE_TIMEOUT_S", 3)
    code = "import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    start = time.monotonic()
    found = probes._probe("p", code, tool, dict(os.environ), sys.executable, tmp_path / "p")
    assert found.verdict == probes.TIMEOUT and time.monotonic() - start < 20, found
    pid = int((tmp_path / "p" / "pid").read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


def test_the_summary_names_what_was_killed():
    table = {
        "probed_at": "2026-12-04T15:00:00+00:00",
        "probes": [
            {"name": "bf16 GEMM", "verdict": probes.KILLED},
            {"name": "fp32 GEMM", "verdict": probes.SURVIVES},
            {"name": "CuTe DSL kernel", "verdict": probes.SKIPPED},
        ],
    }
    line = probes.summary(table)
    assert "killed or failed: bf16 GEMM; survived: fp32 GEMM" in line and "2026-12-04" in line


def fake_smi(folder: Path) -> dict:
    """An nvidia-smi that answers as the H200's does: the probes then run (on the CPU)."""
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, NVIDIA H200, 580.159.04'\n")
    smi.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def test_doctor_gpu_probes_then_uses_the_cache(tmp_path):
    env = {**fake_smi(tmp_path / "bin"), "IKET_CACHE_DIR": str(tmp_path / "cache")}
    first = run_iket("doctor", "--gpu", "--json", cwd=tmp_path, env=env, timeout=600)
    assert first.code in (0, 1) and "Traceback" not in first.stderr, first
    table = json.loads(first.stdout)["gpu"]
    assert [p["name"] for p in table["probes"]] == list(probes.PROBES)
    assert table["cached"] is False and table["stack"]["driver"] == ["580.159.04"]
    lasting = all(p["verdict"] in probes.LASTING for p in table["probes"])
    shown = run_iket("doctor", "--gpu", cwd=tmp_path, env=env, timeout=600)
    # cached only where every probe ended with a verdict on the stack (here, without CUDA, the
    # probes that run fail: probed again, as tests/faults/test_doctor_faults.py checks)
    assert ("under run-iket on this GPU (cached" in shown.stdout) == lasting, shown
    assert all(p["name"] in shown.stdout for p in table["probes"])
    again = run_iket("doctor", "--gpu", "--refresh", "--json", cwd=tmp_path, env=env, timeout=600)
    assert json.loads(again.stdout)["gpu"]["cached"] is False


def test_doctor_gpu_without_a_gpu_says_so_after_the_checks(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": f"{empty}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    result = run_iket("doctor", "--gpu", cwd=tmp_path, env=env)
    assert result.code == 1 and "iket doctor --gpu needs an NVIDIA GPU" in result.stderr, result
    assert "run-iket" in result.stdout and "Traceback" not in result.stderr
