"""Merging Perfetto traces: read back with the same wire-format walker."""

from __future__ import annotations

from iket_cli.model import pftrace

from conftest import FIXTURES, packets, tracks

MULTI = (FIXTURES / "multi" / "iket_pid_0x23f.pftrace").read_bytes()
AFFINE = (FIXTURES / "affine" / "iket_pid_0x204.pftrace").read_bytes()


def event_uuids(data: bytes) -> list[int]:
    found = []
    for packet in packets(data):
        for body in packet.get(pftrace.PACKET_TRACK_EVENT, []):
            found += [v for f, _, v in pftrace.fields(body) if f == pftrace.EVENT_TRACK_UUID]
    return found


def test_round_trip_is_exact():
    assert b"".join(pftrace.encode([f]) for f in pftrace.fields(MULTI)) == MULTI


def test_merge_keeps_everything_apart_and_labelled():
    merged = pftrace.merge([(MULTI, "node-a · rank 0", 0), (AFFINE, "node-b · rank 1", 1000)])
    assert len(packets(merged)) == len(packets(MULTI)) + len(packets(AFFINE))
    descriptors = tracks(merged)
    uuids = [d[pftrace.DESCRIPTOR_UUID][0] for d in descriptors]
    assert len(uuids) == len(set(uuids)), "no track of one process lands on another's"
    assert set(event_uuids(merged)) <= set(uuids), "every event points at a track of its own source"
    roots = [d[pftrace.DESCRIPTOR_NAME][0] for d in descriptors if pftrace.DESCRIPTOR_PARENT_UUID not in d]
    assert roots == ["node-a · rank 0".encode(), "node-b · rank 1".encode()]
    stamps = [p[pftrace.PACKET_TIMESTAMP][0] for p in packets(merged) if pftrace.PACKET_TIMESTAMP in p]
    original = [
        p[pftrace.PACKET_TIMESTAMP][0]
        for p in packets(MULTI) + packets(AFFINE)
        if pftrace.PACKET_TIMESTAMP in p
    ]
    n = sum(1 for p in packets(MULTI) if pftrace.PACKET_TIMESTAMP in p)
    assert stamps[:n] == original[:n] and stamps[n:] == [t + 1000 for t in original[n:]]
    sequences = {p[pftrace.PACKET_SEQUENCE_ID][0] for p in packets(merged) if pftrace.PACKET_SEQUENCE_ID in p}
    assert len(sequences) == 2, "one packet sequence per source"


def test_the_h200_merged_timeline_of_two_ranks_and_a_capture():
    """`iket merge merged ranks affine --timeline` on the H200 (scripts/gpu_check.py): two
    torchrun ranks and a separate capture, one root track each, nothing shared. (It was
    made before empty captures were left out, so torchrun's agent is there too.)"""
    merged = (FIXTURES / "merged_h200.pftrace").read_bytes()
    descriptors = tracks(merged)
    roots = [
        d[pftrace.DESCRIPTOR_NAME][0].decode() for d in descriptors if pftrace.DESCRIPTOR_PARENT_UUID not in d
    ]
    assert roots[1:] == [
        "ranks · vm · rank 0 (pid 0x333)",
        "ranks · vm · rank 1 (pid 0x334)",
        "affine · vm · pid 0x373",
    ]
    uuids = [d[pftrace.DESCRIPTOR_UUID][0] for d in descriptors]
    assert len(uuids) == len(set(uuids))
    assert set(event_uuids(merged)) <= set(uuids)


def test_a_negative_value_is_ten_bytes_of_twos_complement_not_an_endless_loop():
    """A damaged trace's negative timestamp hung ``iket postprocess`` (the fuzz battery found it)."""
    from iket_cli.model.pftrace import encode_varint, read_varint

    data = encode_varint(-1)
    assert len(data) == 10 and read_varint(data, 0) == ((1 << 64) - 1, 10)
    assert encode_varint(300) == b"\xac\x02"
