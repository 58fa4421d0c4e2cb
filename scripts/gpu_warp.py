"""Issue 17 on the GPU: ``python -m pytest -m gpu scripts/gpu_warp.py`` (``gpu_run.sh warp``).

``iket profile --warp-trace`` of a plain PyTorch script (``examples/torch_kernels.py``:
elementwise, reduction, a cuBLAS GEMM, softmax) and of ``examples/multi_kernel.py``, then an
instrumented capture of ``multi_kernel.py`` (its PyTorch launches untraced). Each check reads
what a person reads (show, lint, the report, the console) and compares the launch spans with
an independent recount of the trace. Captures, reports and outputs go to ``$IKET_GPU_KEEP``.
Skipped without a GPU.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
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
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
]
MANGLED = re.compile(r"_Z[NZL]?\d")
GEMM = re.compile(r"cutlass::Kernel2<cutlass_\w+gemm\w*>|gemm|nvjet", re.IGNORECASE)


def iket(*args, name: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-m", "iket_cli", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        stdin=subprocess.DEVNULL,
    )
    KEEP.mkdir(parents=True, exist_ok=True)
    (KEEP / f"{name}.out").write_text(done.stdout)
    (KEEP / f"{name}.err").write_text(done.stderr)
    print(f"$ iket {' '.join(map(str, args))}\n{done.stderr[-1500:]}")
    return done


def recount(trace: Path) -> dict[str, list[int]]:
    spans: dict[str, list[int]] = {}
    for launch in json.loads(trace.read_text())["launches"]:
        warps = launch["warpLifetimes"]
        span = max(w["endTs"] for w in warps) - min(w["startTs"] for w in warps)
        spans.setdefault(launch["kernelName"], []).append(span)
    return spans


def p50(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.5 * len(ordered)) - 1)]


def warp_trace(name: str, *target: str) -> tuple[Path, subprocess.CompletedProcess]:
    """``iket profile --warp-trace -o KEEP/name TARGET``; it must succeed."""
    out = KEEP / name
    done = iket("profile", "--warp-trace", "--clobber", "-o", out, *target, name=f"{name}.profile")
    assert done.returncode == 0, done.stderr
    return out, done


@pytest.fixture(scope="module")
def torch_warp() -> Path:
    # python3: the machine's own, where torch is (the TIRx stack's Python is another)
    out, done = warp_trace("torch_warp", "--", "python3", "examples/torch_kernels.py")
    assert "torch_kernels ok" in done.stdout + done.stderr
    return out


def test_torch_warp_trace_reads_well_and_matches_a_recount(torch_warp):
    record = json.loads((torch_warp / "manifest.json").read_text())
    assert record["mode"] == "warp-trace"
    profile_err = (KEEP / "torch_warp.profile.err").read_text()
    assert not MANGLED.search(profile_err), "the console summary shows short names"
    assert "runs twice" not in profile_err
    shown = iket("show", torch_warp, name="torch_warp.show")
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    assert not MANGLED.search(shown.stdout)
    assert "warp trace" in shown.stdout and GEMM.search(shown.stdout)
    assert "reduce_kernel<…>" in shown.stdout and "vectorized_elementwise_kernel<…" in shown.stdout
    data = json.loads(iket("show", torch_warp, "--format", "json", name="torch_warp.json").stdout)
    (process,) = data["processes"]
    expected = recount(next(torch_warp.glob("*.trace.json")))
    assert {k["kernel"] for k in process["launches"]} == set(expected)
    for kernel in process["launches"]:
        spans = expected[kernel["kernel"]]
        assert kernel["launches"] == len(spans) and kernel["span"]["total"] == sum(spans)
        assert kernel["span"]["p50"] == p50(spans) and kernel["span"]["max"] == max(spans)
    lint = iket("lint", torch_warp, name="torch_warp.lint")
    assert lint.returncode == 0 and "empty-launch" not in lint.stdout + lint.stderr
    page = iket("report", torch_warp, "-o", KEEP / "torch_warp.report.html", name="torch_warp.report")
    assert page.returncode == 0, page.stderr


def test_multi_kernel_warp_trace_and_its_diff(torch_warp):
    outs = [warp_trace(f"multi_warp{number}", "examples/multi_kernel.py")[0] for number in (1, 2)]
    shown = iket("show", outs[0], name="multi_warp.show")
    assert shown.returncode == 0 and shown.stderr == "" and not MANGLED.search(shown.stdout)
    assert "scale_loop_kernel" in shown.stdout and "copy_kernel_kernel" in shown.stdout
    diff = iket("diff", *outs, "--format", "json", name="multi_warp.diff")
    assert diff.returncode == 0, diff.stderr
    changes = json.loads(diff.stdout)["changes"]
    assert changes and all(c["range"] == "launch span" and c["status"] == "matched" for c in changes)
    report = iket("report", outs[0], "-o", KEEP / "multi_warp.report.html", name="multi_warp.report")
    assert report.returncode == 0


def test_instrumented_capture_lists_pytorch_launches_and_reads_well():
    out = KEEP / "multi_mixed"
    done = iket("profile", "--clobber", "-o", out, "examples/multi_kernel.py", name="multi_mixed.profile")
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert err.count("the workload runs twice") == 1 and "4 launches · 208 ranges · 192 marks" in err
    record = json.loads((out / "manifest.json").read_text())
    assert record["mode"] == "instrumented"
    (process,) = record["processes"]
    assert process["uninstrumented"] and all(u["launches"] >= 1 for u in process["uninstrumented"])
    line = next(x for x in err.splitlines() if x.startswith("iket: phases:"))
    assert f"capture pass {record['phases']['capture']:.2f} s" in line
    shown = iket("show", out, name="multi_mixed.show")
    assert "not instrumented (launched, not traced)" in shown.stdout and not MANGLED.search(shown.stdout)
    assert "empty-launch" not in shown.stderr
