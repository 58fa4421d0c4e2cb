"""A CuTe DSL kernel that a model calls between its layers: ``affine(x)`` returns 2 * x + 1.

``affine`` is the Python function that launches the kernel: the one to name with
``KERNEL=cute iket profile examples/model_step.py --extract model_cute_kernel:affine``. It
takes the model's activations (a float32 tensor of N elements) and compiles the kernel on
first use. Each thread handles one element inside an ``affine`` range, with a mark after
its load; outside run-iket CuTe DSL leaves the IKET ops out by itself.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

THREADS = 128
N = 256 * THREADS


@cute.kernel
def affine_kernel(gX: cute.Tensor, gY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    cute.experimental.iket.range_push("affine")
    x = gX[i]
    cute.experimental.iket.mark("loaded")
    gY[i] = x * cutlass.Float32(2.0) + cutlass.Float32(1.0)
    cute.experimental.iket.range_pop()


@cute.jit
def launch(mX: cute.Tensor, mY: cute.Tensor):
    affine_kernel(mX, mY).launch(grid=(N // THREADS, 1, 1), block=(THREADS, 1, 1))


_compiled = []


def affine(x: torch.Tensor) -> torch.Tensor:
    """2 * x + 1 on the GPU, by the instrumented CuTe DSL kernel (x: float32, N elements)."""
    y = torch.empty_like(x)
    if not _compiled:
        _compiled.append(cute.compile(launch, from_dlpack(x), from_dlpack(y)))
    _compiled[0](from_dlpack(x), from_dlpack(y))
    return y
