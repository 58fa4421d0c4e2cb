"""A small elementwise CuTe DSL kernel with every kind of IKET event: y = 2 * x + 1.

Each thread of each 128-thread CTA handles one element, inside a push/pop range; the load
is a token range carrying the CTA's index as an Int32 payload; a mark without payload
follows the load, and one with the loaded value (a Float32 payload) follows the store.

    iket profile examples/cute_affine.py -o iket-cute-affine          # the script
    iket profile examples/cute_affine.py:workload -o iket-cute-affine  # the function
"""

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

N = 1024
THREADS = 128


@cute.kernel
def affine_kernel(gX: cute.Tensor, gY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    cute.experimental.iket.range_push("affine")
    load = cute.experimental.iket.range_start("load", cutlass.Int32(bidx))
    x = gX[i]
    cute.experimental.iket.range_end(load, cutlass.Int32(bidx))
    cute.experimental.iket.mark("loaded")
    gY[i] = x * cutlass.Float32(2.0) + cutlass.Float32(1.0)
    cute.experimental.iket.mark("stored", cutlass.Float32(x))
    cute.experimental.iket.range_pop()


@cute.jit
def affine(mX: cute.Tensor, mY: cute.Tensor):
    affine_kernel(mX, mY).launch(grid=(N // THREADS, 1, 1), block=(THREADS, 1, 1))


def workload():
    import torch

    x = torch.arange(N, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    compiled = cute.compile(affine, from_dlpack(x), from_dlpack(y))
    compiled(from_dlpack(x), from_dlpack(y))
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 2 * x + 1)
    print(f"cute affine: {N} elements correct")


if __name__ == "__main__":
    workload()
