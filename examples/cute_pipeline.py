"""A warp-specialised, pipelined CuTe DSL kernel, instrumented per stage and per role.

Row sums of a [M, K] matrix: each CTA takes 32 rows. Its warp 0 (the producer) copies
32 x 128 tiles of them from global into a 3-stage ring in shared memory; warps 1 to 4 (the
consumers, 128 threads) wait for each stage, add its columns into per-thread partial sums
and release it. The ring is a ``cutlass.pipeline.PipelineAsync`` (mbarriers), as in CUTLASS's
warp-specialised kernels.

IKET events, per role (each role is a ``WarpScope``, whose warps land in
``kernel_symbols.json``):

* producer: a token range ``load`` per tile (payload: the tile's index), and a mark
  ``stage_full`` (payload: the stage) once it is committed;
* consumers: ``wait`` (token range) around the wait for a full stage, ``reduce`` (push/pop)
  around the sum, and ``tile``, a token range that spans loop iterations (a sentinel token
  starts the chain), from one tile's start to the next;
* the DAG ``rowsum_pipeline``: ``load`` -> ``reduce`` through ``smem[stage]`` via ``mbarrier``.

    iket profile examples/cute_pipeline.py -o iket-cute-pipeline

Its shape and speed are variables (issue 33: the arrows of every producer/consumer shape,
and which stage bounds it): ``PRODUCER_WARPS`` (1; 2 copy each tile cooperatively, half
each), ``CONSUMER_WARPS`` (4; or 1, 2: the rows' columns split among them), ``LOAD_REPEAT``
and ``REDUCE_REPEAT`` (1: copy each tile, or sum it, that many times: a slower stage)::

    PRODUCER_WARPS=2 CONSUMER_WARPS=1 iket profile examples/cute_pipeline.py -o two-to-one
    REDUCE_REPEAT=160 iket profile examples/cute_pipeline.py -o slow-reduce
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
TILE_M, TILE_K, STAGES = 32, 128, 3
PRODUCER_WARPS = int(os.environ.get("PRODUCER_WARPS", "1"))
CONSUMER_WARPS = int(os.environ.get("CONSUMER_WARPS", "4"))
LOAD_REPEAT = int(os.environ.get("LOAD_REPEAT", "1"))
REDUCE_REPEAT = int(os.environ.get("REDUCE_REPEAT", "1"))
THREADS = 32 * (PRODUCER_WARPS + CONSUMER_WARPS)
QUARTERS = 32 * CONSUMER_WARPS // TILE_M  # the parts of a row among the consumer threads
COLUMNS = TILE_K // QUARTERS  # each consumer thread sums COLUMNS columns of one row of a tile


@cute.struct
class SharedStorage:
    mbar: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]
    tiles: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, STAGES * TILE_M * TILE_K], 128]


@cute.kernel
def rowsum_kernel(gX: cute.Tensor, gP: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    m0 = bidx * TILE_M
    k_tiles = K // TILE_K

    storage = cutlass.memory.SmemAllocator().allocate(SharedStorage)
    ring = storage.tiles.get_tensor(
        cute.make_layout((TILE_M, TILE_K, STAGES), stride=(TILE_K, 1, TILE_M * TILE_K))
    )
    producer, consumer = pipeline.PipelineAsync.create(
        num_stages=STAGES,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * PRODUCER_WARPS),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * CONSUMER_WARPS),
        barrier_storage=storage.mbar.data_ptr(),
        name="tiles",
    ).make_participants()

    if warp < PRODUCER_WARPS:
        with WarpScope("Producer", warp_start=0, warp_end=PRODUCER_WARPS):
            lane = tidx
            for k in cutlass.range(k_tiles, unroll=1):
                handle = producer.acquire_and_advance()
                load = iket.range_start("load", cutlass.Int32(k))
                for _rep in cutlass.range_constexpr(LOAD_REPEAT):
                    for e in cutlass.range(lane, TILE_M * TILE_K, 32 * PRODUCER_WARPS, unroll=4):
                        r = e // TILE_K
                        c = e % TILE_K
                        ring[r, c, handle.index] = gX[m0 + r, k * TILE_K + c]
                iket.range_end(load, cutlass.Int32(k))
                handle.commit()
                iket.mark("stage_full", cutlass.Int32(handle.index))
    else:
        with WarpScope("Consumer", warp_start=PRODUCER_WARPS, warp_end=PRODUCER_WARPS + CONSUMER_WARPS):
            c = tidx - 32 * PRODUCER_WARPS
            r = c // QUARTERS
            q = c % QUARTERS
            acc = cutlass.Float32(0.0)
            tile = iket.sentinel_token("tile")
            for _k in cutlass.range(k_tiles, unroll=1):
                iket.range_end(tile)
                tile = iket.range_start("tile")
                wait = iket.range_start("wait")
                handle = consumer.wait_and_advance()
                iket.range_end(wait)
                iket.range_push("reduce")
                for _rep in cutlass.range_constexpr(REDUCE_REPEAT):
                    for j in cutlass.range_constexpr(COLUMNS):
                        acc = acc + ring[r, q * COLUMNS + j, handle.index]
                iket.range_pop()
                handle.release()
            iket.range_end(tile)
            gP[m0 + r, q] = acc / cutlass.Float32(REDUCE_REPEAT)


@cute.jit
def rowsum(mX: cute.Tensor, mP: cute.Tensor):
    rowsum_kernel(mX, mP).launch(
        grid=(M // TILE_M, 1, 1), block=(THREADS, 1, 1), smem=SharedStorage.size_in_bytes()
    )


def workload():
    import torch

    torch.manual_seed(0)
    x = torch.randn(M, K, dtype=torch.float32, device="cuda")
    partial = torch.zeros(M, QUARTERS, dtype=torch.float32, device="cuda")
    compiled = cute.compile(rowsum, from_dlpack(x), from_dlpack(partial))
    dump_dir = os.environ.get("CUTE_DSL_DUMP_DIR") or os.getcwd()
    dump_profiling_metadata(dump_dir)  # kernel_symbols.json: the roles' warps, the ring's stages
    dag = iket.dag("rowsum_pipeline")
    dag.edge("load", "reduce", label="smem[stage]", via="mbarrier")
    dag.save()
    compiled(from_dlpack(x), from_dlpack(partial))
    torch.cuda.synchronize()
    torch.testing.assert_close(partial.sum(1), x.sum(1), rtol=1e-4 * REDUCE_REPEAT, atol=1e-3 * REDUCE_REPEAT)
    print(f"cute pipeline: {M} row sums over {K} columns correct")


if __name__ == "__main__":
    workload()
