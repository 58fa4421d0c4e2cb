"""Track descriptors read and moved side by side, against the protobuf walker."""

from __future__ import annotations

import numpy as np
import pytest

from iket_cli.decode import decoder
from iket_cli.decode.split.perfetto import events as pftrace_events
from iket_cli.decode.split.perfetto import tracks as pftrace_tracks
from iket_cli.model import pftrace as P

from conftest import FIXTURES

RAW = {
    "multi": "iket/pid_0x23f/iket.data.json",
    "cute_pipeline": "iket/pid_0xfc5/iket.data.json",
    "cute_affine": "iket/pid_0xf1f/iket.data.json",
}


def _descriptors(name: str) -> bytes:
    data = decoder.decoder_class()(str(FIXTURES / name / RAW[name])).export_perfetto_trace()
    return data[: pftrace_events.descriptors_end(data)]


def _walked_tracks(descriptors: bytes) -> list[list]:
    """[uuid, parent, name] of each descriptor, read field by field."""
    rows = []
    for _, _, packet in P.fields(descriptors):
        body = next(v for n, _, v in P.fields(packet) if n == P.PACKET_TRACK_DESCRIPTOR)
        found = {n: v for n, _, v in P.fields(body)}
        name = bytes(found.get(P.DESCRIPTOR_NAME, b"")).decode()
        rows.append([found.get(P.DESCRIPTOR_UUID, 0), found.get(P.DESCRIPTOR_PARENT_UUID, 0), name])
    return rows


@pytest.mark.parametrize("name", sorted(RAW))
def test_tracks_read_side_by_side_equal_the_walker(name):
    descriptors = _descriptors(name)
    far = P.encode([*[(30 + k, 0, k) for k in range(9)], (1, 0, 9), (2, 2, b"far")])
    many = P.encode([(1, 2, P.encode([(60, 2, far)]))])  # its fields beyond those looked at
    for given in (descriptors, descriptors + many):
        assert pftrace_tracks.tracks(given) == _walked_tracks(given)
    assert pftrace_tracks.tracks(descriptors + many)[-1] == [9, 0, "far"]


def _moved(table: np.ndarray, parent: int) -> int:
    return int(table[parent]) if parent else 0


@pytest.mark.parametrize("name", sorted(RAW))
def test_descriptors_moved_left_out_and_renamed_as_the_walker_would(name):
    descriptors = _descriptors(name)
    rows = _walked_tracks(descriptors)
    table = np.arange(1 + max(uuid for uuid, _, _ in rows), dtype=np.int64) + 200
    drop = {rows[-1][0]}
    renamed = {rows[1][0]: lambda packet: P.encode([(60, 2, P.encode([(1, 0, 7), (2, 2, b"renamed")]))])}
    moved = pftrace_tracks.moved_descriptors(descriptors, table, drop, renamed)
    expected = [
        [7, 0, "renamed"]
        if uuid == rows[1][0]
        else [int(table[uuid]), int(table[parent]) if parent else 0, text]
        for uuid, parent, text in rows
        if uuid not in drop
    ]
    assert _walked_tracks(moved) == expected
