"""A kernel guarded by pytest, with iket's plugin (docs/pytest.md). On a GPU (each window test
runs in a process of its own where run-iket's session allows one window a process):

    pytest examples/test_kernel.py --iket caps                  # capture each marked test
    pytest examples/test_kernel.py --iket-baseline caps          # compare with those captures
    IKET_EXAMPLE_SLOW=1 pytest examples/test_kernel.py --iket-baseline caps   # fails: slower

``spin`` loops ITERS times inside its ``work`` range; IKET_EXAMPLE_SLOW=1 makes it 8 times longer.
"""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
torch = pytest.importorskip("torch")
pytest.importorskip("tvm_tirx")

from tvm_tirx.backend.cuda.iket import IketProfiler  # noqa: E402
from tvm_tirx.script import tirx as T  # noqa: E402

ITERS = 64 * (8 if os.environ.get("IKET_EXAMPLE_SLOW") else 1)


@T.function
def spin(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128)):
        profiler = IketProfiler()
        tid = T.cuda.thread_idx("x")
        acc = T.alloc_local((1,), T.float32)
        acc[0] = A[tid]
        profiler.range_push("work")
        for k in range(ITERS):
            acc[0] = acc[0] * T.float32(0.5) + T.float32(1)
        profiler.range_pop()
        B[tid] = acc[0]


#: Compiled once, at import: no CUDA module loads after the first window began.
KERNEL = IketProfiler().compile(spin, target="cuda") if torch.cuda.is_available() else None


def run_spin():
    kernel = KERNEL
    a = torch.zeros(128, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, torch.full_like(b, 2.0), rtol=1e-3, atol=1e-3)


@pytest.mark.iket(max={"work": "50us"})
def test_spin_is_fast_enough():
    run_spin()


@pytest.mark.xfail(strict=True, reason="a gate that must fail: no range takes under 1 ns")
@pytest.mark.iket(p50={"work": "1ns"})
def test_a_gate_that_must_fail():
    run_spin()


def test_the_fixture_returns_the_capture(iket_window):
    capture = iket_window(run_spin)
    assert capture.range("work").count == 128 // 32  # one per warp
    assert capture.range("work").p50 > 0
