"""A CuTe DSL probe (not an example): what IKET records for ranges never closed and for an
event name given two payload types.

Warp 0 of each CTA starts a token range ``open`` and pushes ``dangling`` and never ends
either; every warp then records a matched ``closed`` token range and a ``value`` mark whose
payload type changes between warps (Int32 in even warps, Float32 in odd ones). On the H200
(run-iket 4.8.1) the decoder drops ``open`` and ``dangling`` without a word, and writes every
``value`` as i32, the Float32 ones as their bit patterns: neither shows in the trace. iket
lints both, from the raw capture and from the payload types its start-up hook noted as the
kernel compiled (``tests/fixtures/cute_unmatched`` is this capture; ``scripts/gpu_cute.py``
runs it).
"""

import cutlass
import cutlass.cute as cute
from cutlass.cute.experimental import iket


@cute.kernel
def unmatched_kernel():
    tidx, _, _ = cute.arch.thread_idx()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    if warp == 0:
        iket.range_start("open")
        iket.range_push("dangling")
    closed = iket.range_start("closed")
    iket.range_end(closed)
    if warp % 2 == 0:
        iket.mark("value", cutlass.Int32(tidx))
    else:
        iket.mark("value", cutlass.Float32(tidx))


@cute.jit
def unmatched():
    unmatched_kernel().launch(grid=(2, 1, 1), block=(128, 1, 1))


def workload():
    import torch

    cute.compile(unmatched)()
    torch.cuda.synchronize()
    print("cute unmatched probe ran")


if __name__ == "__main__":
    workload()
