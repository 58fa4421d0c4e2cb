# A large capture: many CTAs x warps x loop iterations, each with a range and a marker.
import os

import torch
from tvm_tirx.backend.cuda.iket import IketProfiler
from tvm_tirx.script import tirx as T

GRID = int(os.environ.get("GRID", "132"))
BLOCK = int(os.environ.get("BLOCK", "384"))
ITERS = int(os.environ.get("ITERS", "64"))
LAUNCHES = int(os.environ.get("LAUNCHES", "2"))
N = GRID * BLOCK


@T.function
def big(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=BLOCK)):
        profiler = IketProfiler()
        tid = T.cuda.thread_idx("x")
        bid = T.cuda.block_idx("x")
        i = bid * BLOCK + tid
        acc = T.alloc_local((1,), T.float32)
        acc[0] = A[i]
        profiler.range_push("body")
        for k in range(ITERS):  # noqa: B007 (a TIRx loop: the kernel unrolls nothing)
            profiler.range_push("iter")
            acc[0] = acc[0] * T.float32(0.5) + T.float32(1)
            profiler.mark("half")
            profiler.range_pop()
        profiler.range_pop()
        B[i] = acc[0]


def workload():
    k = IketProfiler().compile(big, target="cuda")
    a = torch.randn(N, device="cuda")
    b = torch.empty_like(a)
    for _ in range(LAUNCHES):
        k(a, b)
    torch.cuda.synchronize()
    print("big ok", GRID, BLOCK, ITERS, LAUNCHES)


if __name__ == "__main__":
    workload()
