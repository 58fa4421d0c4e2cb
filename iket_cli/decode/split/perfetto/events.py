"""The track events of a Perfetto export, found and moved to other tracks in numpy.

NVIDIA's decoder writes a ``.pftrace`` as every track descriptor, then every track event
(:func:`descriptors_end`); an event packet is ``timestamp, sequence id, TrackEvent`` with the
event's track uuid among its first few fields. Joining parts of an export means giving each
event a new track uuid, and a uuid that gains or loses a byte changes the lengths of its
TrackEvent and of its packet, which a packet walker in Python does slowly. Here
all packets are found at once (every ``0x0a`` whose packet chains into the next one), their
fields skipped in lockstep, and the varints rewritten, inserted or deleted as arrays
(:mod:`.varints`; the track descriptors: :mod:`.tracks`); only
packets of another shape (a key of two bytes before the uuid, a packet that is not an event)
are walked one by one (docs/history/benchmarks.md, "The Perfetto export split").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ....model import pftrace as P
from .. import sidecar
from . import varints as V
from .varints import PAD, padded

PACKET_KEY = P.TRACE_PACKET << 3 | 2
TIMESTAMP_KEY = P.PACKET_TIMESTAMP << 3
SEQUENCE_KEY = P.PACKET_SEQUENCE_ID << 3
TYPE_KEY = P.EVENT_TYPE << 3
EVENT_KEY = P.PACKET_TRACK_EVENT << 3 | 2
UUID_KEY = P.EVENT_TRACK_UUID << 3
#: A new uuid that says: leave the event out.
DROP = -1


def descriptors_end(data: bytes) -> int:
    """Where the events begin: the offset of the first packet that is not a track descriptor."""
    at = 0
    while at < len(data):
        if data[at] != PACKET_KEY:
            raise ValueError(f"not a Perfetto trace: byte {at} does not open a packet")
        length, body = P.read_varint(data, at + 1)
        key, _ = P.read_varint(data, body)
        if key >> 3 != P.PACKET_TRACK_DESCRIPTOR:
            return at
        at = body + length
    return at


class Packets(NamedTuple):
    """The event packets found in a buffer, in byte order, and where their varints are."""

    start: np.ndarray  #: the packet's first byte (its 0x0a)
    end: np.ndarray  #: the byte after it
    event: np.ndarray  #: the TrackEvent field's key
    uuid: np.ndarray  #: the track uuid field's key
    value: np.ndarray  #: the track uuid
    width: np.ndarray  #: the bytes of its varint


def compact(found: Packets) -> Packets:
    """:func:`find`'s answer as 32-bit numbers where they fit (half the
    memory of :func:`find`'s 64-bit columns, for parts kept while others are found)."""
    if not all(int(column.max(initial=0)) < 1 << 31 for column in found):
        return found
    return Packets(*(column.astype(np.int32) for column in found))


def widened(found: Packets) -> Packets:
    """:func:`compact`'s answer as :func:`find` gave it (64-bit numbers, for the move's sums)."""
    return Packets(*(column.astype(np.int64, copy=False) for column in found))


def save(path, found: Packets) -> None:
    """Keep :func:`find`'s answer in a file (:func:`compact`)."""
    sidecar.save(path, compact(found)._asdict())


def load(path) -> Packets:
    """:func:`find`'s answer kept by :func:`save`."""
    kept, _ = sidecar.load(path)
    return widened(Packets(*(kept[name] for name in Packets._fields)))


def find(a: np.ndarray, end: int) -> Packets:
    """Every event packet in ``a[:end]`` whose track uuid is found (candidates: a run of
    them is checked by :func:`pieces`): the decoder's usual opening (a one-byte length, a
    9-byte timestamp, sequence id, a TrackEvent of under 128 bytes) read at fixed offsets,
    any other shape field by field."""
    c = np.flatnonzero(a[:end] == PACKET_KEY)
    usual = (a[c + 1] < 0x80) & (a[c + 2] == TIMESTAMP_KEY) & (a[c + 11] < 0x80) & (a[c + 10] >= 0x80)
    usual &= (a[c + 12] == SEQUENCE_KEY) & (a[c + 13] < 0x80) & (a[c + 14] == EVENT_KEY) & (a[c + 15] < 0x80)
    first = c[usual]
    stop = first + 2 + a[first + 1]
    keep = stop <= end
    first, stop = first[keep], stop[keep]
    uuid = first + 18  # most events open with their type (a one-byte value), then the uuid
    plain = (a[first + 16] == TYPE_KEY) & (a[first + 17] < 0x80) & (a[uuid] == UUID_KEY)
    rest = np.flatnonzero(~plain)
    uuid[rest] = V.field(
        a, first[rest] + 16, np.minimum(first[rest] + 16 + a[first[rest] + 15], stop[rest]), UUID_KEY
    )
    quick = Packets(first, stop, first + 14, uuid, uuid, uuid)
    other = _found_slowly(a, c[~usual], end)
    if len(other.start):
        merged = [np.concatenate([x, y]) for x, y in zip(quick, other, strict=True)]
        order = np.argsort(merged[0], kind="stable")
        quick = Packets(*(column[order] for column in merged))
    if (quick.uuid < 0).any():
        quick = Packets(*(column[quick.uuid >= 0] for column in quick))
    width = V.widths(a, quick.uuid + 1)
    return quick._replace(value=V.values(a, quick.uuid + 1, width), width=width)


def _found_slowly(a: np.ndarray, c: np.ndarray, end: int) -> Packets:
    """The candidates ``c`` of other shapes, their fields skipped one at a time."""
    size_width = V.widths(a, c + 1)
    c, size_width = c[size_width <= 3], size_width[size_width <= 3]
    body = c + 1 + size_width
    stop = body + V.values(a, c + 1, size_width)
    ok = (a[np.minimum(body, len(a) - 1)] == TIMESTAMP_KEY) & (stop <= end)
    c, body, stop = c[ok], body[ok], stop[ok]
    event = V.field(a, body, stop, EVENT_KEY)
    c, stop, event = c[event >= 0], stop[event >= 0], event[event >= 0]
    event_width = V.widths(a, event + 1)
    event_body = event + 1 + event_width
    event_end = event_body + V.values(a, event + 1, event_width)
    uuid = V.field(a, event_body, np.minimum(event_end, stop), UUID_KEY)
    uuid[event_end > stop] = -1
    return Packets(c, stop, event, uuid, uuid, uuid)


def pieces(found: Packets, end: int) -> list[tuple[int, int, slice | None]]:
    """``[0, end)`` as (first byte, end, packets) in order: runs of found packets that chain
    one into the next (``packets``: their slice of ``found``), and the bytes between, whole
    packets of other shapes (``None``). A candidate inside another packet is left out."""
    if not len(found.start):
        return [(0, end, None)] if end else []
    breaks = np.flatnonzero(found.end[:-1] != found.start[1:])
    firsts = np.r_[0, breaks + 1].tolist()
    lasts = np.r_[breaks, len(found.start) - 1].tolist()
    out: list[tuple[int, int, slice | None]] = []
    at = 0
    for first, last in zip(firsts, lasts, strict=True):
        begin, stop = int(found.start[first]), int(found.end[last])
        if begin < at:
            continue  # a candidate inside a packet already taken
        if begin > at:
            out.append((at, begin, None))
        out.append((begin, stop, slice(first, last + 1)))
        at = stop
    if at < end:
        out.append((at, end, None))
    return out


def walked(data: bytes, table: np.ndarray) -> tuple[bytes, list[bytes]]:
    """Packets of any shape with their events' track uuids looked up in ``table``, one by
    one; the packets left out (:data:`DROP`) returned apart."""
    kept, dropped = [], []
    for number, wire, packet in P.fields(data):
        if number != P.TRACE_PACKET or wire != 2:
            raise ValueError("not a Perfetto trace: top-level field other than TracePacket")
        parts = P.fields(packet)
        event = next((value for n, _, value in parts if n == P.PACKET_TRACK_EVENT), None)
        if event is None:
            kept.append(P.encode([(number, wire, packet)]))
            continue
        uuid = next((value for n, _, value in P.fields(event) if n == P.EVENT_TRACK_UUID), None)
        if uuid is not None and _looked_up(table, uuid) == DROP:
            dropped.append(bytes(packet))
            continue
        moved = P.rewrite(event, {P.EVENT_TRACK_UUID: lambda v: _looked_up(table, v)})
        kept.append(P.encode([(number, wire, P.rewrite(packet, {P.PACKET_TRACK_EVENT: moved}))]))
    return b"".join(kept), dropped


def _looked_up(table: np.ndarray, uuid: int) -> int:
    if not 0 <= uuid < len(table):
        raise ValueError(f"an event on track {uuid}, which the export does not describe")
    return int(table[uuid])


def moved(
    events: bytes | memoryview,
    table: np.ndarray,
    found: Packets | None = None,
    a: np.ndarray | None = None,
) -> tuple[bytes, list[bytes]]:
    """``events`` (packets, from :func:`descriptors_end` on) with each event's track uuid
    ``u`` replaced by ``table[u]``, the lengths around it rewritten; the events whose new
    uuid is :data:`DROP` left out and returned apart (their packets' bodies). ``found``:
    :func:`find`'s answer for these events, if it is known already; ``a``: ``events`` as
    :func:`.varints.padded` gives them, if at hand (rewritten in place: the caller's copy)."""
    if not len(events):
        return b"", []
    a = a if a is not None else padded(events)
    found = found if found is not None else find(a, len(events))
    out: list[bytes] = []
    dropped: list[bytes] = []
    for begin, stop, which in pieces(found, len(events)):
        if which is None:
            kept, gone = walked(events[begin:stop], table)
            out.append(kept)
            dropped += gone
            continue
        run = Packets(
            *(column[which] - begin if begin and k < 4 else column[which] for k, column in enumerate(found))
        )
        out.append(_moved_run(a[begin : stop + PAD], stop - begin, run, table, dropped))
    return b"".join(out), dropped


def _moved_run(run: np.ndarray, size: int, found: Packets, table: np.ndarray, dropped: list) -> bytes:
    """One run of chained packets (``run[:size]``, offsets in ``found`` relative to it) with
    their uuids looked up in ``table``: a uuid that keeps its width is written in place (its
    digits looked up per track), only the packets whose uuid changes width are edited."""
    if int(found.value.max()) >= len(table) or int(found.value.min()) < 0:
        raise ValueError("an event on a track the export does not describe")
    new = table[found.value]
    gone = new == DROP
    if gone.any():  # the bodies of the packets left out, as the walker gives them
        first = found.start[gone] + 1 + V.widths(run, found.start[gone] + 1)
        dropped += [bytes(run[b:e]) for b, e in zip(first.tolist(), found.end[gone].tolist(), strict=True)]
    if not gone.any() and np.array_equal(new, found.value):
        return run[:size].tobytes()
    width_of = V.digits(np.maximum(table, 0))  # each track's new uuid's width
    grows = (width_of[found.value] != found.width) & ~gone
    same = ~grows & ~gone
    _write_uuids(run, found.uuid[same] + 1, found.value[same], table, width_of)
    grown = np.flatnonzero(grows)
    start, event, uuid = found.start[grown], found.event[grown], found.uuid[grown]
    uuid_width, new = found.width[grown], new[grown]
    grow_uuid = width_of[found.value[grown]] - uuid_width
    packet_width, event_width = V.widths(run, start + 1), V.widths(run, event + 1)
    event_size = V.values(run, event + 1, event_width) + grow_uuid
    grow_event = V.digits(event_size) - event_width
    packet_size = V.values(run, start + 1, packet_width) + grow_uuid + grow_event
    at = np.concatenate([start + 1, event + 1, uuid + 1])
    old = np.concatenate([packet_width, event_width, uuid_width])
    values = np.concatenate([packet_size, event_size, new])
    cuts = [(b, e) for b, e in zip(found.start[gone].tolist(), found.end[gone].tolist(), strict=True)]
    return V.edited(run[:size], at, old, values, cuts).tobytes()  # ``run``: a copy of ours


def _write_uuids(
    run: np.ndarray, at: np.ndarray, tracks: np.ndarray, table: np.ndarray, width: np.ndarray
) -> None:
    """The new uuid of each of ``tracks`` written over its old one, of the same width, at ``at``."""
    moves = table != np.arange(len(table))
    if not moves.any():
        return
    at, tracks = (at, tracks) if moves.all() else (at[moves[tracks]], tracks[moves[tracks]])
    value = np.maximum(table, 0)
    for k in range(int(width.max())):
        digit = (((value >> (7 * k)) & 0x7F) | np.where(width > k + 1, 0x80, 0)).astype(np.uint8)
        wide = slice(None) if k == 0 else width[tracks] > k
        run[at[wide] + k] = digit[tracks[wide]]
