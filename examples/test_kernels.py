"""Twelve kernel tests over three kernels, each captured in a window of its own in one pytest
process (docs/pytest.md). On a GPU:

    pytest examples/test_kernels.py --iket caps          # twelve captures, every gate decided
    IKET_EXAMPLE_SLOW=1 pytest examples/test_kernels.py --iket caps-slow   # test_spin_is_fast fails

- ``spin`` is compiled at import; IKET_EXAMPLE_SLOW=1 makes its loop 8 times longer (only
  ``test_spin_is_fast`` gates it tightly: it alone fails, with the gate table).
- ``profiled_affine`` (the seed kernel) is compiled by a fixture, between two tests.
- the TIRx kernel of ``model_step`` runs inside a bf16 training step: the mark's ``function``
  and ``calls`` put only that call in the window (the step's GEMMs stay outside it).
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
#: spin's tight limit, between its time and the slowed loop's (a guess until measured on a GPU).
SPIN_LIMIT = os.environ.get("IKET_EXAMPLE_SPIN_LIMIT", "3us")


@T.function
def spin(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128)):
        profiler = IketProfiler()
        tid = T.cuda.thread_idx("x")
        B[tid] = A[tid]
        profiler.range_push("work")
        # In global memory, not a register: a loop of register arithmetic may be scheduled out
        # of the range (on the H100 the range read 256 ns at 64 and at 512 iterations alike).
        for _k in range(ITERS):
            B[tid] = B[tid] * T.float32(0.5) + T.float32(1)
        profiler.range_pop()


SPIN = IketProfiler().compile(spin, target="cuda") if torch.cuda.is_available() else None


def run_spin(times=1):
    a = torch.zeros(128, device="cuda")
    b = torch.empty_like(a)
    for _ in range(times):
        SPIN(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, torch.full_like(b, 2.0), rtol=1e-3, atol=1e-3)


@pytest.mark.iket(max={"work": SPIN_LIMIT})
def test_spin_is_fast():
    run_spin()


@pytest.mark.iket(p50={"work": "1ms"})
def test_spin_p50():
    run_spin()


@pytest.mark.iket(max={"work": "1ms"})
@pytest.mark.parametrize("times", [1, 2, 3])
def test_spin_repeated(times):
    run_spin(times)


@pytest.fixture(scope="module")
def affine():
    """The seed kernel, compiled here: between two tests, outside any window."""
    import profile_affine

    return IketProfiler().compile(profile_affine.profiled_affine, target="cuda")


@pytest.mark.iket(max={"affine": "1ms"})
@pytest.mark.parametrize("start", [0, 1, 2, 3])
def test_affine(affine, start):
    a = torch.arange(start, start + 32, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    affine(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, 2 * a + 1)


def model_call(call):
    """The mark that windows call ``call`` of the model's kernel alone."""
    mark = pytest.mark.iket(function="model_step:affine", calls=call, p50={"affine": "1ms"})
    return pytest.param(call, marks=mark, id=f"call{call}")


@pytest.mark.parametrize("call", [model_call("1"), model_call("3"), model_call("5")])
def test_model_step_kernel(call):
    """The model's kernel inside a bf16 training step: only its call ``call`` is captured."""
    import model_step

    model_step.main()
