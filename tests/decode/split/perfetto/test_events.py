"""Events moved to other tracks in numpy, against a packet-by-packet rewrite with the
protobuf walker, on the decoder's exports of the fixtures and on packets of other shapes."""

from __future__ import annotations

import numpy as np
import pytest

from iket_cli.decode import decoder
from iket_cli.decode.split.perfetto import events as events_mod
from iket_cli.decode.split.perfetto.varints import padded
from iket_cli.model import pftrace as P

from conftest import FIXTURES

RAW = {
    "multi": "iket/pid_0x23f/iket.data.json",
    "cute_pipeline": "iket/pid_0xfc5/iket.data.json",
    "cute_affine": "iket/pid_0xf1f/iket.data.json",
}


def reference(events: bytes, table) -> tuple[bytes, list[bytes]]:
    """Each packet parsed and written again with its track uuid looked up (or left out)."""
    kept, dropped = [], []
    for _, _, packet in P.fields(events):
        fields = P.fields(packet)
        body = next(v for n, _, v in fields if n == P.PACKET_TRACK_EVENT)
        uuid = next(v for n, _, v in P.fields(body) if n == P.EVENT_TRACK_UUID)
        if table[uuid] < 0:
            dropped.append(bytes(packet))
            continue
        moved = P.encode([(n, w, table[v] if n == P.EVENT_TRACK_UUID else v) for n, w, v in P.fields(body)])
        packet = P.encode([(n, w, moved if n == P.PACKET_TRACK_EVENT else v) for n, w, v in fields])
        kept.append(P.encode([(P.TRACE_PACKET, 2, packet)]))
    return b"".join(kept), dropped


def _events(name: str) -> bytes:
    data = decoder.decoder_class()(str(FIXTURES / name / RAW[name])).export_perfetto_trace()
    return data[events_mod.descriptors_end(data) :]


def _tables(size: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    shuffled = rng.permutation(size) + 1
    dropped = np.arange(size, dtype=np.int64)
    dropped[rng.choice(size, size // 5, replace=False)] = events_mod.DROP
    return {
        "identity": np.arange(size, dtype=np.int64),
        "past 127": np.arange(size, dtype=np.int64) + 120,
        "past 16383": np.arange(size, dtype=np.int64) + 16380,
        "into 2**28": np.arange(size, dtype=np.int64) + (1 << 28),
        "shrunk": np.maximum(np.arange(size, dtype=np.int64) - 200, 1),
        "shuffled": shuffled,
        "some dropped": dropped,
    }


@pytest.mark.parametrize("name", sorted(RAW))
def test_moved_events_equal_the_walker_for_every_kind_of_table(name):
    events = _events(name)
    size = 1 + max(
        v
        for _, _, p in P.fields(events)
        for n, _, b in P.fields(p)
        if n == 11
        for m, _, v in P.fields(b)
        if m == 11
    )
    for label, table in _tables(size).items():
        assert events_mod.moved(events, table) == reference(events, table), label


def test_packets_of_other_shapes_between_usual_ones_are_walked():
    """A long name (two-byte lengths), annotations before the uuid, a two-byte key first,
    a small timestamp, and a packet with no event: each moved as the walker moves it."""
    events = _events("multi")
    first = next(iter(P.fields(events)))[2]
    odd = [
        P.encode(
            [(8, 0, 1 << 60), (10, 0, 1), (11, 2, P.encode([(9, 0, 1), (11, 0, 5), (23, 2, b"x" * 300)]))]
        ),
        P.encode([(8, 0, 5), (10, 0, 1), (11, 2, P.encode([(4, 2, b"\x20\x01"), (9, 0, 1), (11, 0, 200)]))]),
        P.encode([(8, 0, 1 << 60), (10, 0, 1), (11, 2, P.encode([(23, 2, b"name"), (11, 0, 3)]))]),
        P.encode([(8, 0, 1 << 60), (10, 0, 1), (11, 2, P.encode([(9, 0, 1), (11, 0, 4)]))]),
    ]
    mixed = b"".join(P.encode([(1, 2, p)]) for p in [first, *odd, first])
    assert len(events_mod.pieces(events_mod.find(padded(mixed), len(mixed)), len(mixed))) > 1
    for label, table in _tables(400).items():
        assert events_mod.moved(mixed, table) == reference(mixed, table), label
    no_event = P.encode([(1, 2, P.encode([(8, 0, 7), (10, 0, 1)]))])
    assert events_mod.moved(no_event + mixed, _tables(400)["past 127"])[0].startswith(no_event)


def test_an_event_on_a_track_the_table_does_not_know_is_refused():
    events = _events("multi")
    with pytest.raises(ValueError, match="does not describe"):
        events_mod.moved(events, np.arange(3, dtype=np.int64))


def test_packets_found_and_kept_in_a_file_move_the_same(tmp_path):
    events = _events("cute_pipeline")
    found = events_mod.find(padded(events), len(events))
    events_mod.save(tmp_path / "found", found)
    table = _tables(4000)["past 127"]
    kept = events_mod.load(tmp_path / "found")
    assert events_mod.moved(events, table, kept) == events_mod.moved(events, table)
