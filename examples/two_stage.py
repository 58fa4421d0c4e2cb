"""A kernel of two timed stages for repeated captures and the diff gate (issue 18).

``fixed`` runs FIXED dependent multiply-adds per thread, ``work`` runs WORK of them (default
2000 each: a few microseconds per warp on an H200). ``WORK=2200`` makes ``work`` about 10%
slower and leaves ``fixed`` as it is::

    iket profile examples/two_stage.py:workload --repeat 5 -o base
    WORK=2200 iket profile examples/two_stage.py:workload --repeat 5 -o slower
    iket diff base slower --fail-over 5%
"""

import os

import torch
from tvm_tirx.backend.cuda.iket import IketProfiler
from tvm_tirx.script import tirx as T

GRID, BLOCK, LAUNCHES = 132, 128, 3
FIXED = int(os.environ.get("FIXED", "2000"))
WORK = int(os.environ.get("WORK", "2000"))
N = GRID * BLOCK


@T.function
def two_stage(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=BLOCK)):
        profiler = IketProfiler()
        i = T.cuda.block_idx("x") * BLOCK + T.cuda.thread_idx("x")
        acc = T.alloc_local((1,), T.float32)
        acc[0] = A[i]
        profiler.range_push("fixed")
        for k in range(FIXED):
            acc[0] = acc[0] * T.float32(0.999) + T.float32(0.5)
        profiler.range_pop()
        profiler.range_push("work")
        for k in range(WORK):
            acc[0] = acc[0] * T.float32(0.999) + T.float32(0.5)
        profiler.range_pop()
        B[i] = acc[0]


def workload():
    kernel = IketProfiler().compile(two_stage, target="cuda")
    a = torch.rand(N, device="cuda")
    b = torch.empty_like(a)
    for _ in range(LAUNCHES):
        kernel(a, b)
    torch.cuda.synchronize()
    print("two_stage ok", FIXED, WORK)


if __name__ == "__main__":
    workload()
