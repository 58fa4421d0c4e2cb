"""The seed's affine kernel launched inside a CUDA graph (issue 51's third case).

Warmed up on a side stream, captured with ``torch.cuda.graph``, the graph replayed 3 times,
then the kernel launched once eagerly. run-iket 4.8.1 traces the eager launches only; the
graph's launches are missing from the trace (``graphLaunches: {}``), and the workload's
output says ``IKET profiling operation failed with CUDA error 0001``.
"""

import torch
from profile_affine import profiled_affine
from tvm_tirx.backend.cuda.iket import IketProfiler

REPLAYS = 3


def workload():
    compiled = IketProfiler().compile(profiled_affine, target="cuda")
    a = torch.arange(32, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        compiled(a, b)  # warm-up, eager
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        compiled(a, b)
    for _ in range(REPLAYS):
        graph.replay()
    compiled(a, b)  # eager
    torch.cuda.synchronize()
    torch.testing.assert_close(b, 2 * a + 1)
    print("graph_affine ok", flush=True)


if __name__ == "__main__":
    workload()
