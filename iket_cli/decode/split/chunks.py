"""A big launch decoded by CTAs: which launches split, and each chunk's raw manifest.

A launch's JSON export costs the decoder time and memory in proportion to its events, and two
big exports side by side spend most of their time faulting in fresh memory; the same launches
in quarters, one after another in long-lived workers (:mod:`..workers`), take about half as
long (docs/history/benchmarks.md, "A big launch decoded by CTAs"). So a big launch is decoded by CTAs:
the raw manifest of a chunk is the launch's with ``gridDimX`` and the buffer range of its CTAs
(each warp's buffer has a fixed size, CTA after CTA), and the decoder exports it as it would
the launch, with CTA numbers counted from the chunk's first. :mod:`.stitch` puts the chunks'
exports back together, byte for byte the decoder's export of the whole launch.
"""

from __future__ import annotations

from ...model.vocab import JSON_EXPORT

#: Raw bytes of a launch per chunk. Smaller chunks cost the decoder less per event and a
#: worker less memory, but give the stitch more runs; the measured choice: docs/history/benchmarks.md,
#: "The stitch written by the workers, and smaller chunks".
CHUNK_RAW_BYTES = 1 << 19
#: Raw bytes of a launch per chunk of its Perfetto export, at least. A process's Perfetto
#: export is cut in about :data:`PERFETTO_PARTS_PER_CPU` parts a CPU: small parts decode at
#: the decoder's best speed and each takes a fraction of a whole export's memory, while each
#: part costs a move and a worker's turn (:func:`perfetto_chunk_bytes`; docs/history/benchmarks.md,
#: "The Perfetto export split").
PERFETTO_CHUNK_RAW_BYTES = 1 << 20
PERFETTO_PARTS_PER_CPU = 6
#: Raw bytes a warp must be able to record for its launch to be split (see chunk_count).
MIN_WARP_BYTES = 128
WARP = 32


def perfetto_chunk_bytes(raw_bytes: int, cpus: int) -> int:
    """The raw bytes per chunk of a Perfetto export of ``raw_bytes`` on ``cpus`` CPUs: a
    share of :data:`PERFETTO_PARTS_PER_CPU` parts a CPU, at least :data:`PERFETTO_CHUNK_RAW_BYTES`."""
    return max(PERFETTO_CHUNK_RAW_BYTES, -(-raw_bytes // max(PERFETTO_PARTS_PER_CPU * cpus, 1)))


def chunk_bytes(export: str, raw_bytes: int, cpus: int) -> int:
    """The raw bytes per chunk of a launch of an ``export`` of ``raw_bytes`` on ``cpus`` CPUs."""
    return CHUNK_RAW_BYTES if export == JSON_EXPORT else perfetto_chunk_bytes(raw_bytes, cpus)


def ctas(launch: dict) -> int:
    """The CTAs of ``launch`` if it can be split by them, else 0: a decodable launch of a
    one-dimensional grid without clusters, whose buffer holds exactly one warp buffer per
    warp of each CTA."""
    try:
        if not launch.get("canDecode") or launch.get("gridDimY") != 1 or launch.get("gridDimZ") != 1:
            return 0
        if any(
            int(v) > 1
            for key in ("clusterDim", "preferredClusterDim", "enabledCluster")
            for v in launch.get(key, {}).values()
        ):
            return 0
        threads = int(launch["blockDimX"]) * int(launch["blockDimY"]) * int(launch["blockDimZ"])
        warp_bytes, size = int(launch["warpBufferSize"]), int(launch["bufferSize"])
        blocks = int(launch["gridDimX"])
        ref = launch["dataRef"]
        fits = size == blocks * -(-threads // WARP) * warp_bytes and int(ref["size"]) == size
        return blocks if warp_bytes > 0 and blocks > 1 and fits else 0
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0


def chunk_count(launch: dict, raw_bytes: int = CHUNK_RAW_BYTES) -> int:
    """Into how many chunks ``launch`` is decoded (1: whole). A launch whose warps record
    little (a warp trace: 24 bytes a warp) is decoded whole: the stitch costs a few
    microseconds of Python per warp, the decoder's export of such a warp less."""
    blocks = ctas(launch)
    if not blocks or int(launch["warpBufferSize"]) < MIN_WARP_BYTES:
        return 1
    return max(1, min(blocks, -(-int(launch["bufferSize"]) // raw_bytes)))


def firsts(blocks: int, count: int) -> list[int]:
    """The first CTA of each of ``count`` chunks of ``blocks`` CTAs (as equal as they come)."""
    return [blocks * number // count for number in range(count)]


def spans(blocks: int, count: int) -> list[tuple[int, int]]:
    """(first CTA, CTA after the last) of each of ``count`` chunks of ``blocks`` CTAs."""
    starts = firsts(blocks, count)
    return list(zip(starts, [*starts[1:], blocks], strict=True))


def chunk(launch: dict, first: int, last: int) -> dict:
    """The raw manifest entry that keeps CTAs ``first`` to ``last - 1`` of ``launch``."""
    per_cta = int(launch["bufferSize"]) // int(launch["gridDimX"])
    offset, size = first * per_cta, (last - first) * per_cta
    ref = dict(launch["dataRef"], offset=int(launch["dataRef"]["offset"]) + offset, size=size)
    return {
        **launch,
        "gridDimX": last - first,
        "bufferOffset": int(launch["bufferOffset"]) + offset,
        "bufferSize": size,
        "dataRef": ref,
    }
