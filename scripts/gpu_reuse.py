"""Tracker reuse on the GPU (issue 18): ``python -m pytest -m gpu scripts/gpu_reuse.py``.

A TIRx workload whose kernel lives in a module of its own (``kern.py``), captured four times
with ``--tracker auto``: fresh (cached), reused (the workload runs once, the same ranges and
marks), then with the kernel edited to record one more mark (a new cubin: the reused tracker
does not fit, iket says so and captures again from scratch, and the new mark is there), then
reused again. Captures go to ``$IKET_GPU_KEEP``. Skipped without a GPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KEEP = Path(os.environ.get("IKET_GPU_KEEP", "/tmp/iket-gpu-keep"))
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
    pytest.mark.skipif(importlib.util.find_spec("tvm_tirx") is None, reason="TIRx is not installed"),
]
#: The kernel lives in a module of its own (the target script stays the same, so the cache key
#: does too): examples/profile_affine.py, imported by the workload below.
KERNEL = (ROOT / "examples" / "profile_affine.py").read_text()
WORKLOAD = 'import kern\ndef workload():\n    kern.workload()\n    print("workload ran", flush=True)\n'


def capture(work: Path, name: str) -> tuple[subprocess.CompletedProcess, dict, dict]:
    out = KEEP / name
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "IKET_CACHE_DIR": str(work / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "iket_cli", "profile", "w.py:workload", "-o", out, "--clobber"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    (KEEP / f"{name}.err").write_text(done.stderr)
    print(f"== {name}\n{done.stderr[-1200:]}")
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "manifest.json").read_text())
    trace = json.loads(next(out.glob("*.trace.json")).read_text())
    names = {"ranges": len([r for x in trace["launches"] for r in x["ranges"]])}
    names["marks"] = sorted(
        trace["stringTable"][m["markerNameIdx"]] for x in trace["launches"] for m in x["markers"]
    )
    return done, record, names


def test_reuse_then_an_edited_kernel_then_reuse(tmp_path):
    KEEP.mkdir(parents=True, exist_ok=True)
    (tmp_path / "kern.py").write_text(KERNEL)
    (tmp_path / "w.py").write_text(WORKLOAD)
    first, record, seen = capture(tmp_path, "reuse1")
    assert record["tracker"]["mode"] == "fresh" and first.stdout.count("workload ran") == 2
    second, record, again = capture(tmp_path, "reuse2")
    assert record["tracker"]["mode"] == "reused" and record["phases"]["tracker"] is None
    assert second.stdout.count("workload ran") == 1, "one pass"
    assert again == seen == {"ranges": 1, "marks": ["loaded"]}, "one warp: one range, one mark"
    edited = KERNEL.replace(
        "        profiler.range_pop()", '        profiler.mark("stored")\n        profiler.range_pop()'
    )
    assert edited != KERNEL
    (tmp_path / "kern.py").write_text(edited)
    third, record, changed = capture(tmp_path, "reuse3")
    assert "does not fit this capture" in third.stderr
    assert record["tracker"]["mode"] == "fresh" and record["tracker"]["rerun"]
    assert changed["marks"] == ["loaded", "stored"], "the edited kernel, captured right"
    fourth, record, last = capture(tmp_path, "reuse4")
    assert fourth.stdout.count("workload ran") == 1
    assert record["tracker"]["mode"] == "reused" and last == changed
    assert not list(KEEP.glob(".reuse*.iket-staging-*")), "nothing left beside the captures"
