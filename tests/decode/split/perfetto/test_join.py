"""The Perfetto export by launches and CTA chunks, joined, against the decoder's whole export
and run-iket's files from the H200: bytes where only launches are split, the same trace
(read through Perfetto's own schema, conftest.perfetto_view) where chunks are."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from iket_cli.decode import decoder
from iket_cli.decode.split import chunks
from iket_cli.decode.split import launches as join
from iket_cli.decode.split.perfetto import join as pftrace_join
from iket_cli.decode.split.perfetto import parts as pftrace_parts
from iket_cli.decode.tasks import indices_name, pftrace_beside
from iket_cli.model import pftrace

from conftest import FIXTURES, perfetto_view

#: The fixtures with a raw capture and run-iket's .pftrace of it, by process.
RAW = {
    "multi": "0x23f",
    "warp_multi": "0x7c4",
    "cute_pipeline": "0xfc5",
    "cute_affine": "0xf1f",
    "cute_unmatched": "0x4c8",
    "affine": "0x204",
    "spawn": "0x299",
}


def _spooled(exporter, manifest: Path, *, chunk: bool) -> Path:
    """One part exported and spooled as a one-off worker does it (beside it: its sidecar and
    the packets found in it)."""
    spool = manifest.with_suffix(".out")
    part = pftrace_parts.exported(exporter(str(manifest)), chunk=chunk)
    pftrace_parts.spool(part, spool, *pftrace_beside(spool))
    return spool


def joined(raw: Path, chunk_bytes: int, *, gz: bool = True, held: bool = True) -> tuple[bytes, dict] | None:
    """The export of ``raw`` by its parts (launches, or CTA chunks of ``chunk_bytes`` raw
    bytes), each part exported and moved here as the workers do; None if it does not split.
    ``held``: each part kept in memory for its move, as a long-lived worker does (else
    spooled to files and read back, as a one-off worker's)."""
    launches = join.part_manifests(raw, chunk_bytes, "perfetto")
    if launches is None:
        return None
    plan = pftrace_join.Join(len(launches), pftrace=True, gz=gz)
    exporter = decoder.decoder_class()
    for number, launch in enumerate(launches):
        manifests = launch.chunks or (launch.path,)
        plan.start(number, len(manifests))
        for manifest, first in zip(manifests, launch.firsts if launch.chunks else [0], strict=True):
            if held:
                spool = manifest.with_suffix(".out")
                part = pftrace_parts.exported(exporter(str(manifest)), chunk=bool(launch.chunks))
                job = plan.add(spool, first, part.described)
                assert job is not None and not spool.exists(), "a part kept is moved, never spooled"
            else:
                part, job = None, plan.add(_spooled(exporter, manifest, chunk=bool(launch.chunks)), first)
            if job is not None:
                plan.answered(job, pftrace_parts.move(job, part))
        plan.end()
    out, packed = raw.parent / "joined.pftrace", raw.parent / "joined.pftrace.gz"
    plan.write(out, packed if gz else None)
    data = out.read_bytes()
    if gz:
        assert gzip.decompress(packed.read_bytes()) == data, "the .gz holds the same trace"
    return data, {"parts": sum(len(units) for units in plan.launches)}


def _theirs(name: str, raw: Path) -> bytes:
    """run-iket's .pftrace of the fixture (warp_multi kept none: the decoder's whole export)."""
    kept = FIXTURES / name / f"iket_pid_{RAW[name]}.pftrace"
    return kept.read_bytes() if kept.is_file() else decoder.decoder_class()(str(raw)).export_perfetto_trace()


def _copy(tmp_path: Path, name: str) -> Path:
    shutil.copytree(FIXTURES / name, tmp_path / name)
    return tmp_path / name / "iket" / f"pid_{RAW[name]}" / "iket.data.json"


@pytest.mark.parametrize("held", [True, False], ids=["kept", "spooled"])
@pytest.mark.parametrize("name", ["multi", "warp_multi"])
def test_launches_join_byte_for_byte_into_run_iket_file(tmp_path, name, held):
    raw = _copy(tmp_path, name)
    data, _ = joined(raw, 1 << 62, held=held)
    assert data == _theirs(name, raw)


@pytest.mark.parametrize("name", sorted(RAW))
def test_every_fixture_forced_into_cta_chunks_is_the_same_trace(tmp_path, monkeypatch, name):
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)  # the fixtures' small warps split too
    raw = _copy(tmp_path, name)
    planned = join.planned_parts(raw, 1)
    result = joined(raw, 1)
    theirs = _theirs(name, raw)
    if result is None:  # one launch of one CTA: nothing to split (the export is the decoder's)
        assert planned == [] and decoder.decoder_class()(str(raw)).export_perfetto_trace() == theirs
        return
    data, said = result
    assert said["parts"] == sum(planned) > len(planned) >= 1, "really split by chunks"
    ours, whole = perfetto_view(data), perfetto_view(theirs)
    assert ours == whole
    assert sum(whole[1].values()) > 0


def test_torch_warp_27_launches_join_byte_for_byte_and_by_chunks_as_the_same_trace(tmp_path, monkeypatch):
    """The PyTorch + cuBLAS capture (warp-trace mode: many small launches and 170k warps)."""
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)
    with tarfile.open(FIXTURES / "torch_warp.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    raw = next(tmp_path.rglob("iket.data.json"))
    whole = decoder.decoder_class()(str(raw)).export_perfetto_trace()
    assert joined(raw, 1 << 62, gz=False)[0] == whole
    data, said = joined(raw, 1 << 16, gz=False)
    assert said["parts"] > 27
    assert perfetto_view(data) == perfetto_view(whole)


def test_keep256_by_launches_bytes_and_by_chunks_the_same_trace(tmp_path):
    """The big capture (2 launches of 132 CTAs, 2.4M events) at the default chunk size."""
    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    raw = next(tmp_path.rglob("iket.data.json"))
    whole = decoder.decoder_class()(str(raw)).export_perfetto_trace()
    assert joined(raw, 1 << 62, gz=False, held=False)[0] == whole
    data, said = joined(raw, chunks.PERFETTO_CHUNK_RAW_BYTES)
    assert said["parts"] >= 6
    assert perfetto_view(data) == perfetto_view(whole)


def test_chunks_whose_grid_has_other_events_do_not_join_and_the_plan_is_unchanged(tmp_path, monkeypatch):
    """A chunk with an event on its grid besides its kernel slice: the join refuses (the
    launch is then exported whole) and numbers the next launch as if it never tried."""
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)
    raw = _copy(tmp_path, "cute_pipeline")
    (launch,) = join.part_manifests(raw, 1, "perfetto")
    spools = []
    for manifest in launch.chunks:
        spools.append(_spooled(decoder.decoder_class(), manifest, chunk=True))
    sidecar = spools[1].with_name(indices_name(spools[1].name))
    found = json.loads(sidecar.read_text())
    found[pftrace_parts.SHARED].append(found[pftrace_parts.SHARED][0])  # a second begin
    sidecar.write_text(json.dumps(found))
    plan = pftrace_join.Join(1, pftrace=True, gz=False)
    with pytest.raises(ValueError, match="do not join"):
        plan.launch(0, spools, launch.firsts)
    assert (plan.next, plan.rooted, plan.launches) == (2, False, [])


def test_the_flows_find_the_slices_of_a_joined_trace(tmp_path, monkeypatch):
    """The arrows of the flows trace are placed on a trace joined from chunks as on the
    whole one: the same slices are found by their keys."""
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)
    raw = _copy(tmp_path, "cute_pipeline")
    data, _ = joined(raw, 1, gz=False)
    whole = (FIXTURES / "cute_pipeline" / "iket_pid_0xfc5.pftrace").read_bytes()
    ours, theirs = pftrace.slice_index(data), pftrace.slice_index(whole)
    assert set(ours) == set(theirs) and len(ours) > 100
    links = list(zip(sorted(ours)[:-1], sorted(ours)[1:], strict=True))[:50]
    _, placed = pftrace.add_flows(data, links)
    assert placed == len(links)


def test_the_flows_read_interned_event_names():
    """A slice named through the sequence's interned ``event_names`` is found by its name."""
    enc = pftrace.encode

    def descriptor(uuid: int, parent: int | None, name: str) -> bytes:
        body = [(1, 0, uuid), (2, 2, name.encode())] + ([(5, 0, parent)] if parent else [])
        return enc([(pftrace.TRACE_PACKET, 2, enc([(pftrace.PACKET_TRACK_DESCRIPTOR, 2, enc(body))]))])

    interned = enc([(pftrace.INTERNED_EVENT_NAMES, 2, enc([(1, 0, 7), (2, 2, b"load")]))])
    event = enc(
        [(pftrace.EVENT_TYPE, 0, 1), (pftrace.EVENT_TRACK_UUID, 0, 4), (pftrace.EVENT_NAME_IID, 0, 7)]
    )
    packet = enc(
        [
            (pftrace.PACKET_TIMESTAMP, 0, 1000),
            (pftrace.PACKET_SEQUENCE_ID, 0, 3),
            (pftrace.PACKET_INTERNED_DATA, 2, interned),
            (pftrace.PACKET_TRACK_EVENT, 2, event),
        ]
    )
    data = b"".join(
        [descriptor(1, None, "Root"), descriptor(2, 1, "CTA(5, 0, 0)"), descriptor(4, 2, "Warp03")]
    ) + enc([(pftrace.TRACE_PACKET, 2, packet)])
    assert pftrace.slice_index(data) == {((5, 0, 0), 3, "load", 1000): 3}
