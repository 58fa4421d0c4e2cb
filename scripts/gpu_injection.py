"""run-iket's injection killing a real workload on the GPU (issue 32, item 2):
``python -m pytest -m gpu scripts/gpu_injection.py``.

The workload runs the instrumented affine TIRx kernel between two bf16 GEMMs (torch
``a @ b``), which run-iket 4.8.1 aborts on (docs/faults.md, "When run-iket itself fails"). iket
must say that the injection killed it, in which pass, with the hint; with ``--log-level info`` it quotes the
injection log's warning. The same script without iket runs fine. Skipped without a GPU.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers of gpu_faults.py beside it
from gpu_faults import ROOT, iket, keep_text, leftovers, pytestmark, settled

__all__ = ["pytestmark"]

MODEL = (
    "import torch\n"
    "import profile_affine as p\n"
    "def workload():\n"
    "    a = torch.randn(256, 256, device='cuda', dtype=torch.bfloat16)\n"
    "    b = (a @ a).float().sum().item()\n"
    "    p.workload()\n"
    "    print('bf16 GEMM and kernel ran', b == b, flush=True)\n"
    "if __name__ == '__main__':\n"
    "    workload()\n"
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    pytest.importorskip("torch")
    shutil.copy(ROOT / "examples" / "profile_affine.py", tmp_path / "profile_affine.py")
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def test_the_gemm_runs_without_iket(work):
    """The bf16 GEMM alone, plainly (the TIRx kernel cannot run outside run-iket: issue 32)."""
    (work / "plain.py").write_text(
        "import torch\n"
        "a = torch.randn(256, 256, device='cuda', dtype=torch.bfloat16)\n"
        "print('bf16 GEMM ran', bool(torch.isfinite((a @ a).float()).all()))\n"
    )
    done = subprocess.run([sys.executable, "plain.py"], cwd=work, capture_output=True, text=True, timeout=300)
    keep_text("injection_plain.out", done.stdout + done.stderr)
    assert done.returncode == 0 and "bf16 GEMM ran True" in done.stdout, done.stderr


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ([], "in the tracker pass"),
        (["--log-level", "info"], "in the tracker pass"),
        (["--warp-trace"], "in the capture pass (--warp-trace runs no tracker pass)"),
    ],
    ids=["default", "log-info", "warp-trace"],
)
def test_a_bf16_gemm_is_said_as_the_injection_s_crash(work, extra, where):
    done = iket("profile", "model.py:workload", "-o", "cap", *extra, cwd=work)
    name = "-".join(extra).strip("-") or "default"
    keep_text(f"injection_{name}.err", done.stderr)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"inside run-iket's injection {where}" in done.stderr, done.stderr
    assert "half-precision (bf16 or fp16) cuBLAS GEMMs" in done.stderr
    record = json.loads((work / "cap.failed" / "manifest.json").read_text())
    assert record["error"]["type"] == "InjectionCrash"
    assert "launched before: " in done.stderr
    if "info" in extra:
        assert "injection log: " in done.stderr and "could not inspect a CUDA module" in done.stderr
    assert settled() == [] and leftovers(work) == []
