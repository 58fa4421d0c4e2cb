"""A TIRx kernel that a model calls between its layers: ``affine(x)`` returns 2 * x + 1.

``affine`` is the Python function that launches the kernel: the one to name with
``iket profile examples/model_step.py --extract model_tirx_kernel:affine``. It takes the
model's activations (a float32 tensor of N elements) and compiles the kernel on first use.
Each of the GRID x BLOCK threads handles one element inside an ``affine`` range, with a mark
once its value is loaded.
"""

import torch
from tvm_tirx.backend.cuda.iket import IketProfiler
from tvm_tirx.script import tirx as T

GRID, BLOCK = 256, 128
N = GRID * BLOCK


@T.function
def affine_kernel(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=BLOCK)):
        profiler = IketProfiler()
        i = T.cuda.block_idx("x") * BLOCK + T.cuda.thread_idx("x")
        profiler.range_push("affine")
        value = A[i]
        profiler.mark("loaded")
        B[i] = T.float32(2) * value + T.float32(1)
        profiler.range_pop()


_compiled = []


def affine(x: torch.Tensor) -> torch.Tensor:
    """2 * x + 1 on the GPU, by the instrumented TIRx kernel (x: float32, N elements)."""
    if not _compiled:
        _compiled.append(IketProfiler().compile(affine_kernel, target="cuda"))
    y = torch.empty_like(x)
    _compiled[0](x, y)
    return y
