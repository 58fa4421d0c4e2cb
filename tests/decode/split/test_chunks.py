"""A launch split by CTAs and stitched back: byte for byte the decoder's export of the whole
launch, on every H200 capture whose launches have more than one CTA (real decoder, here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iket_cli.decode import decoder
from iket_cli.decode.split import chunks
from iket_cli.decode.split.json import indices, stitch
from iket_cli.decode.split.json import merge as join
from iket_cli.decode.split.json.layout import bounds

from conftest import kept

#: (capture, pid): TIRx push/pop ranges and marks (4 launches of 4 CTAs), CuTe DSL token
#: ranges across warps with payloads (8 CTAs), unmatched ranges (2 CTAs), warp lifetimes only
#: (PyTorch's kernels beside TIRx's), CuTe DSL affine (8 CTAs).
CAPTURES = [
    ("multi", "0x23f"),
    ("cute_pipeline", "0xfc5"),
    ("cute_unmatched", "0x4c8"),
    ("warp_multi", "0x7c4"),
    ("cute_affine", "0xf1f"),
]


def _export(raw: Path, data: dict, launch: dict, name: str, *, find_indices: bool) -> Path:
    manifest = raw.with_name(f".{name}.json")
    manifest.write_text(json.dumps({**data, "launches": [launch]}))
    spooled = raw.with_name(f".{name}.out")
    join.spool(decoder.decoder_class()(str(manifest)), spooled, find_indices=find_indices)
    return spooled


def _torch_warp(tmp_path: Path) -> Path:
    import tarfile

    from conftest import FIXTURES

    with tarfile.open(FIXTURES / "torch_warp.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "iket" / "pid_0x21f" / "iket.data.json"


@pytest.mark.parametrize(("name", "pid"), [*CAPTURES, ("torch_warp", "0x21f")])
def test_stitched_chunks_are_the_decoders_whole_launch(tmp_path, name, pid):
    """torch_warp: PyTorch's and cuBLAS's kernels of up to 4096 CTAs on 132 SMs, many CTAs an
    SM one after another, 2-D blocks; the others: each CTA on an SM of its own."""
    if name == "torch_warp":
        raw = _torch_warp(tmp_path)
    else:
        raw = kept(tmp_path, name) / "iket" / f"pid_{pid}" / "iket.data.json"
    data = json.loads(raw.read_text())
    split, seen = 0, set()
    for number, launch in enumerate(x for x in data["launches"] if x["canDecode"]):
        blocks = chunks.ctas(launch)
        if not blocks or (name == "torch_warp" and launch["kernelName"] in seen):
            continue  # torch_warp: each of its 5 kernels once (27 launches take 45 s)
        seen.add(launch["kernelName"])
        whole = _export(raw, data, launch, f"whole{number}", find_indices=False).read_bytes()
        for count in sorted({2, 3, min(blocks, 7)} & set(range(2, blocks + 1))):
            firsts = chunks.firsts(blocks, count)
            spools = [
                _export(raw, data, chunks.chunk(launch, first, last), f"c{number}.{c}", find_indices=True)
                for c, (first, last) in enumerate(chunks.spans(blocks, len(firsts)))
            ]
            out = raw.with_name(f".stitched{number}.out")
            with stitch.Stitch(spools, firsts, blocks) as stitched:
                stitched.write_file(out, parts=count)  # in as many jobs as chunks
            assert out.read_bytes() == whole, (number, count)
            start, end, _ = bounds(whole)
            assert stitched.counts == indices.count(memoryview(whole)[start:end])
            assert len(stitched.maps) == count
            split += 1
    assert split, "some launch was split"


def test_which_launches_split_and_how():
    launch = {
        "canDecode": True, "gridDimX": 8, "gridDimY": 1, "gridDimZ": 1,
        "blockDimX": 160, "blockDimY": 1, "blockDimZ": 1, "clusterDim": {"x": 0, "y": 0, "z": 0},
        "warpBufferSize": 976, "bufferSize": 8 * 5 * 976, "bufferOffset": 4096,
        "dataRef": {"filename": "iket.data.bin", "offset": 4096, "size": 8 * 5 * 976},
    }  # fmt: skip
    assert chunks.ctas(launch) == 8
    assert chunks.chunk_count(launch, 976 * 5 * 3) == 3
    assert chunks.chunk_count(launch, 1 << 30) == 1, "small: whole"
    assert chunks.chunk_count(launch, 1) == 8, "at most a CTA a chunk"
    small = {**launch, "warpBufferSize": 24, "bufferSize": 8 * 5 * 24, "dataRef": {"size": 8 * 5 * 24}}
    assert chunks.ctas(small) == 8 and chunks.chunk_count(small, 1) == 1, "a warp trace: whole"
    assert chunks.firsts(8, 3) == [0, 2, 5]
    assert chunks.spans(8, 3) == [(0, 2), (2, 5), (5, 8)]
    part = chunks.chunk(launch, 2, 5)
    assert (part["gridDimX"], part["bufferOffset"], part["bufferSize"]) == (3, 4096 + 2 * 4880, 3 * 4880)
    assert part["dataRef"] == {"filename": "iket.data.bin", "offset": 4096 + 2 * 4880, "size": 3 * 4880}
    for change in (
        {"gridDimY": 2},  # a 2-D grid
        {"clusterDim": {"x": 2, "y": 1, "z": 1}},  # clusters
        {"bufferSize": 8 * 5 * 976 + 4},  # not one buffer per warp
        {"canDecode": False},
        {"gridDimX": 1, "bufferSize": 4880, "dataRef": {"offset": 0, "size": 4880}},  # one CTA
        {"warpBufferSize": None},
    ):
        assert chunks.ctas({**launch, **change}) == 0, change
        assert chunks.chunk_count({**launch, **change}, 1) == 1


def test_chunks_that_do_not_fit_the_layout_are_refused(tmp_path):
    """The same chunk twice (a warp in two chunks), or a spool in another layout: ValueError,
    which makes the pool decode the launch whole."""
    raw = kept(tmp_path, "multi") / "iket" / "pid_0x23f" / "iket.data.json"
    data = json.loads(raw.read_text())
    launch = next(x for x in data["launches"] if x["canDecode"])
    one = _export(raw, data, chunks.chunk(launch, 0, 2), "c0", find_indices=True)
    with pytest.raises(ValueError, match="same warp"):
        stitch.Stitch([one, one], [0, 0], 4)
    other = raw.with_name(".bad.out")
    other.write_bytes(b'{"launches":[{"gridDimX":2}]}')
    with pytest.raises(ValueError):
        stitch.Stitch([one, other], [0, 2], 4)


@pytest.mark.parametrize("names_gain", [0, 10], ids=["names-keep-digits", "names-gain-digits"])
def test_a_launch_stitched_into_a_whole_export_takes_its_tables(tmp_path, names_gain):
    """A later launch is stitched straight into the merge's output, its indices through the
    whole export's tables: the bytes are the launch's own export rewritten by those maps
    (the regular rewrite, :func:`indices.remapped`), names moved (over their own digits,
    or spliced where they gain one) and locations that gain digits alike; CuTe DSL token
    ranges that end in another warp among them."""
    raw = kept(tmp_path, "cute_pipeline") / "iket" / "pid_0xfc5" / "iket.data.json"
    data = json.loads(raw.read_text())
    launch = next(x for x in data["launches"] if x["canDecode"])
    blocks = chunks.ctas(launch)
    whole = _export(raw, data, launch, "whole", find_indices=False).read_bytes()
    firsts = chunks.firsts(blocks, 3)
    spools = [
        _export(raw, data, chunks.chunk(launch, first, last), f"c{c}", find_indices=True)
        for c, (first, last) in enumerate(chunks.spans(blocks, len(firsts)))
    ]
    with stitch.Stitch(spools, firsts, blocks) as stitched:
        names = [index + names_gain for index in range(len(stitched.strings))][::-1]  # every name moves
        assert len(names) < 10, "names_gain=0 keeps one digit"
        locs = [index * 37 + 5 for index in range(len(stitched.locations))]  # most gain digits
        with open(tmp_path / "written", "wb") as written:
            written.write(b"[earlier launches],")  # buffered: the launch goes after it
            counts = stitched.write_into(written, names, locs, parts=2)
            written.write(b"]")
    start, end, _ = bounds(whole)
    expected = b"[earlier launches]," + bytes(indices.remapped(whole[start:end], names, locs)) + b"]"
    assert (tmp_path / "written").read_bytes() == expected
    assert counts == indices.count(memoryview(whole)[start:end])
