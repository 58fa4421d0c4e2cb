"""Round-robin producers: two load warps take turns filling a ring of shared memory.

Row sums of a [M, K] matrix, as ``cute_pipeline.py`` computes them, in another shape: a
2-stage ring (a ``cutlass.pipeline.PipelineAsync``) whose stage 0 only warp 0 fills and
stage 1 only warp 1: warp 0 copies the even tiles (0, 2, 4, ...), warp 1 the odd ones, and
warps 2 to 5 (the consumers) take the stages in turn. A producer warp runs half as many
``load`` instances as a consumer warp runs ``reduce``s, so the order of instances on their
warps cannot say which load fed which reduce; the payloads can, and both ends carry one:

* ``PAYLOAD=tile`` (default): the tile's index, unique in the CTA;
* ``PAYLOAD=stage``: the ring's stage, a repeating ring index: the j-th instance carrying
  it on one side fed the j-th carrying it on the other.

Both ends of each range carry the payload (``range_start`` and ``range_end``), as CuTe DSL
requires. ``LOAD_END_PAYLOAD=0`` leaves it off ``load``'s ``range_end``: run-iket 4.8.1's
capture pass dies of that on the H200 (SIGSEGV), and iket's diagnosis names the range.
``REDUCE_RANGE=push`` makes ``reduce`` a push/pop range instead, the payload on its push
only (a pop carries none).

``SWAP=1`` has warp 0 copy the odd tiles and warp 1 the even ones, so the consumers, which
take stage 0 then stage 1, take each pair of tiles out of order: 1, 0, 3, 2, ...
The DAG ``round_robin``: ``load`` -> ``reduce`` through ``smem[stage]``.

    iket profile examples/cute_round_robin.py -o iket-round-robin
    PAYLOAD=stage SWAP=1 iket profile examples/cute_round_robin.py -o iket-round-robin-swap
"""

import os

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.experimental import iket
from cutlass.cute.runtime import from_dlpack
from cutlass.pipeline.profiling import dump_profiling_metadata
from cutlass.utils.profiling import WarpScope

M, K = 256, 4096
TILE_M, TILE_K, STAGES = 32, 128, 2  # stage w is producer warp w's
CONSUMER_WARPS = 4
THREADS = 32 * (STAGES + CONSUMER_WARPS)
QUARTERS = 32 * CONSUMER_WARPS // TILE_M
COLUMNS = TILE_K // QUARTERS
BY_STAGE = os.environ.get("PAYLOAD", "tile") == "stage"
SWAP = int(os.environ.get("SWAP", "0") == "1")
PUSH = os.environ.get("REDUCE_RANGE", "token") == "push"
END_PAYLOAD = os.environ.get("LOAD_END_PAYLOAD", "1") == "1"


@cute.struct
class SharedStorage:
    mbar: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]
    tiles: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, STAGES * TILE_M * TILE_K], 128]


@cute.kernel
def round_robin_kernel(gX: cute.Tensor, gP: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    m0 = bidx * TILE_M
    k_tiles = K // TILE_K
    storage = cutlass.memory.SmemAllocator().allocate(SharedStorage)
    ring = storage.tiles.get_tensor(
        cute.make_layout((TILE_M, TILE_K, STAGES), stride=(TILE_K, 1, TILE_M * TILE_K))
    )
    pipe = pipeline.PipelineAsync.create(
        num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32),  # one warp a stage
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * CONSUMER_WARPS),
        barrier_storage=storage.mbar.data_ptr(),
        name="tiles",
    )

    if warp < STAGES:
        with WarpScope("Producer", warp_start=0, warp_end=STAGES):
            lane = tidx % 32
            phase = cutlass.Int32(1)  # a producer starts on an empty ring
            for i in cutlass.range(k_tiles // STAGES, unroll=1):
                k = STAGES * i + (warp ^ SWAP)
                state = pipeline.PipelineState(STAGES, i, warp, phase)
                pipe.producer_acquire(state)
                load = iket.range_start("load", _payload(k, warp))
                for e in cutlass.range(lane, TILE_M * TILE_K, 32, unroll=4):
                    row, col = e // TILE_K, e % TILE_K
                    ring[row, col, warp] = gX[m0 + row, k * TILE_K + col]
                if cutlass.const_expr(END_PAYLOAD):
                    iket.range_end(load, _payload(k, warp))
                else:
                    iket.range_end(load)
                pipe.producer_commit(state)
                phase = phase ^ 1
    else:
        with WarpScope("Consumer", warp_start=STAGES, warp_end=STAGES + CONSUMER_WARPS):
            c = tidx - 32 * STAGES
            r = c // QUARTERS
            q = c % QUARTERS
            acc = cutlass.Float32(0.0)
            state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
            for j in cutlass.range(k_tiles, unroll=1):
                pipe.consumer_wait(state)
                stage = state.index
                payload = _payload(j - stage + (stage ^ SWAP), stage)
                if cutlass.const_expr(PUSH):
                    iket.range_push("reduce", payload)
                else:
                    reduce = iket.range_start("reduce", payload)
                for n in cutlass.range_constexpr(COLUMNS):
                    acc = acc + ring[r, q * COLUMNS + n, stage]
                if cutlass.const_expr(PUSH):
                    iket.range_pop()
                else:
                    iket.range_end(reduce, payload)
                pipe.consumer_release(state)
                state.advance()
            gP[m0 + r, q] = acc


def _payload(k, stage):
    """The payload both ends carry: the tile's index, or (PAYLOAD=stage) the ring's stage."""
    return cutlass.Int32(stage) if BY_STAGE else cutlass.Int32(k)


@cute.jit
def rowsum(mX: cute.Tensor, mP: cute.Tensor):
    round_robin_kernel(mX, mP).launch(
        grid=(M // TILE_M, 1, 1), block=(THREADS, 1, 1), smem=SharedStorage.size_in_bytes()
    )


def workload():
    import torch

    torch.manual_seed(0)
    x = torch.randn(M, K, dtype=torch.float32, device="cuda")
    partial = torch.zeros(M, QUARTERS, dtype=torch.float32, device="cuda")
    compiled = cute.compile(rowsum, from_dlpack(x), from_dlpack(partial))
    dump_dir = os.environ.get("CUTE_DSL_DUMP_DIR") or os.getcwd()
    dump_profiling_metadata(dump_dir)
    dag = iket.dag("round_robin")
    dag.edge("load", "reduce", label="smem[stage]", via="mbarrier")
    dag.save()
    compiled(from_dlpack(x), from_dlpack(partial))
    torch.cuda.synchronize()
    torch.testing.assert_close(partial.sum(1), x.sum(1), rtol=1e-4, atol=2e-3)
    print(
        f"cute round robin: {M} row sums over {K} columns correct (payload {'stage' if BY_STAGE else 'tile'})"
    )


if __name__ == "__main__":
    workload()
