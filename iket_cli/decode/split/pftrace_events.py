"""The track events of a Perfetto export, found and moved to other tracks in numpy.

NVIDIA's decoder writes a ``.pftrace`` as every track descriptor, then every track event
(:func:`descriptors_end`); an event packet is ``timestamp, sequence id, TrackEvent`` with the
event's track uuid among its first few fields. Joining parts of an export means giving each
event a new track uuid, and a uuid that gains or loses a byte changes the lengths of its
TrackEvent and of its packet: a packet walker in Python does that at about 1.6 MB/s. Here
all packets are found at once (every ``0x0a`` whose packet chains into the next one), their
fields skipped in lockstep, and the varints rewritten, inserted or deleted as arrays; only
packets of another shape (a key of two bytes before the uuid, a packet that is not an event)
are walked one by one (docs/benchmarks.md, "The Perfetto export split").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...model import pftrace as P

PACKET_KEY = P.TRACE_PACKET << 3 | 2
TIMESTAMP_KEY = P.PACKET_TIMESTAMP << 3
SEQUENCE_KEY = P.PACKET_SEQUENCE_ID << 3
TYPE_KEY = P.EVENT_TYPE << 3
EVENT_KEY = P.PACKET_TRACK_EVENT << 3 | 2
UUID_KEY = P.EVENT_TRACK_UUID << 3
#: Fields skipped, at most, before the one looked for (the decoder writes two or three).
MOST_FIELDS = 8
#: Bytes a varint takes at most here (a uuid or length below 2**35).
MOST_DIGITS = 5
#: Bytes a varint takes at most (a 64-bit value).
VARINT_BYTES = 10
#: Zero bytes after a copy of the events, so that reads past a packet never leave the array.
PAD = 16
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


def padded(data: bytes) -> np.ndarray:
    """``data`` as a writable uint8 array with :data:`PAD` zero bytes after it."""
    buf = np.zeros(len(data) + PAD, np.uint8)
    buf[: len(data)] = np.frombuffer(data, np.uint8)
    return buf


def _width(a: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The bytes taken by the varint at each offset ``at``."""
    width = np.ones(len(at), np.int64)
    going = np.flatnonzero(a[at] >= 0x80)
    k = 1
    while len(going) and k < VARINT_BYTES:
        width[going] += 1
        going = going[a[at[going] + k] >= 0x80]
        k += 1
    return width


def _value(a: np.ndarray, at: np.ndarray, width: np.ndarray) -> np.ndarray:
    value = a[at].astype(np.int64) & 0x7F
    longer = np.flatnonzero(width > 1)
    for k in range(1, MOST_DIGITS):
        if not len(longer):
            break
        value[longer] |= (a[at[longer] + k].astype(np.int64) & 0x7F) << (7 * k)
        longer = longer[width[longer] > k + 1]
    return value


def _field(a: np.ndarray, cur: np.ndarray, end: np.ndarray, key: int) -> np.ndarray:
    """The offset of field ``key`` (a one-byte key) in each message ``[cur, end)``, or -1:
    the messages' fields skipped side by side."""
    found = np.full(len(cur), -1, np.int64)
    live = np.arange(len(cur))
    at, stop = cur.astype(np.int64), end.astype(np.int64)
    for _ in range(MOST_FIELDS):
        if not len(live):
            break
        inside = at < stop
        k = a[np.where(inside, at, 0)]
        hit = inside & (k == key)
        found[live[hit]] = at[hit]
        go = inside & ~hit & (k < 0x80)
        live, at, stop, k = live[go], at[go], stop[go], k[go]
        after = at + 1
        nxt = a[after]
        wire = k & 7
        skip = np.where(
            wire == 2, 1 + nxt.astype(np.int64), np.where(wire == 1, 8, np.where(wire == 5, 4, 1))
        )
        odd = np.flatnonzero((nxt >= 0x80) & ((wire == 0) | (wire == 2)) | (wire == 3) | (wire == 4))
        if len(odd):  # a varint of several bytes, a long field, or a group: the general way
            width = _width(a, after[odd])
            long = wire[odd] == 2
            skip[odd] = np.where(long, width + _value(a, after[odd], width), width)
            skip[odd[(wire[odd] == 3) | (wire[odd] == 4)]] = 1 << 62  # groups: not looked into
        at = after + skip
    return found


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
    uuid[rest] = _field(
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
    width = _width(a, quick.uuid + 1)
    return quick._replace(value=_value(a, quick.uuid + 1, width), width=width)


def _found_slowly(a: np.ndarray, c: np.ndarray, end: int) -> Packets:
    """The candidates ``c`` of other shapes, their fields skipped one at a time."""
    size_width = _width(a, c + 1)
    c, size_width = c[size_width <= 3], size_width[size_width <= 3]
    body = c + 1 + size_width
    stop = body + _value(a, c + 1, size_width)
    ok = (a[np.minimum(body, len(a) - 1)] == TIMESTAMP_KEY) & (stop <= end)
    c, body, stop = c[ok], body[ok], stop[ok]
    event = _field(a, body, stop, EVENT_KEY)
    c, stop, event = c[event >= 0], stop[event >= 0], event[event >= 0]
    event_width = _width(a, event + 1)
    event_body = event + 1 + event_width
    event_end = event_body + _value(a, event + 1, event_width)
    uuid = _field(a, event_body, np.minimum(event_end, stop), UUID_KEY)
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


def moved(events: bytes | memoryview, table: np.ndarray) -> tuple[bytes, list[bytes]]:
    """``events`` (packets, from :func:`descriptors_end` on) with each event's track uuid
    ``u`` replaced by ``table[u]``, the lengths around it rewritten; the events whose new
    uuid is :data:`DROP` left out and returned apart (their packets' bodies)."""
    if not len(events):
        return b"", []
    a = padded(events)
    found = find(a, len(events))
    out: list[bytes] = []
    dropped: list[bytes] = []
    for begin, stop, which in pieces(found, len(events)):
        if which is None:
            kept, gone = walked(events[begin:stop], table)
            out.append(kept)
            dropped += gone
            continue
        run = Packets(*(column[which] - (begin if k < 4 else 0) for k, column in enumerate(found)))
        out.append(_moved_run(a[begin : stop + PAD], stop - begin, run, table, dropped))
    return b"".join(out), dropped


def _moved_run(run: np.ndarray, size: int, found: Packets, table: np.ndarray, dropped: list) -> bytes:
    """One run of chained packets (``run[:size]``, offsets in ``found`` relative to it) with
    their uuids looked up in ``table``."""
    if int(found.value.max()) >= len(table) or int(found.value.min()) < 0:
        raise ValueError("an event on a track the export does not describe")
    new = table[found.value]
    gone = new == DROP
    if gone.any():  # the bodies of the packets left out, as the walker gives them
        first = found.start[gone] + 1 + _width(run, found.start[gone] + 1)
        dropped += [bytes(run[b:e]) for b, e in zip(first.tolist(), found.end[gone].tolist(), strict=True)]
    if not gone.any() and np.array_equal(new, found.value):
        return run[:size].tobytes()
    keep = ~gone
    uuid, new, uuid_width = found.uuid[keep], new[keep], found.width[keep]
    grow_uuid = _digits(new) - uuid_width
    grown = np.flatnonzero(keep)[grow_uuid != 0]  # only their lengths change
    start, event, grow_uuid_kept = found.start[grown], found.event[grown], grow_uuid[grow_uuid != 0]
    packet_width, event_width = _width(run, start + 1), _width(run, event + 1)
    event_size = _value(run, event + 1, event_width) + grow_uuid_kept
    grow_event = _digits(event_size) - event_width
    packet_size = _value(run, start + 1, packet_width) + grow_uuid_kept + grow_event
    at = np.concatenate([start + 1, event + 1, uuid + 1])
    old = np.concatenate([packet_width, event_width, uuid_width])
    values = np.concatenate([packet_size, event_size, new])
    cuts = [(b, e) for b, e in zip(found.start[gone].tolist(), found.end[gone].tolist(), strict=True)]
    return _edited(run[:size], at, old, values, cuts).tobytes()  # ``run``: a copy of ours


def _digits(value: np.ndarray) -> np.ndarray:
    """The bytes each value takes as a varint."""
    if len(value) and int(value.max()) >= 1 << (7 * MOST_DIGITS):
        raise ValueError("a uuid or length too large to rewrite here")
    width = np.ones(len(value), np.int64)
    for k in range(1, MOST_DIGITS):
        width += value >= 1 << (7 * k)
    return width


def _edited(buf: np.ndarray, at: np.ndarray, old: np.ndarray, values: np.ndarray, cuts: list) -> np.ndarray:
    """``buf`` with the varint at each ``at`` (``old`` bytes long) replaced by ``values``
    (its digits written in place, missing ones inserted, extra ones deleted), and the byte
    ranges ``cuts`` deleted."""
    new = _digits(values)
    where, what = [], []
    deletes = [np.arange(b, e) for b, e in cuts]
    live = np.arange(len(values))
    for k in range(MOST_DIGITS):
        digit = ((values[live] >> (7 * k)) & 0x7F).astype(np.uint8) | (new[live] > k + 1).astype(
            np.uint8
        ) << 7
        inside = old[live] > k
        buf[at[live[inside]] + k] = digit[inside]
        added = live[~inside]
        where.append(at[added] + old[added])
        what.append(digit[~inside])
        live = live[new[live] > k + 1]
    for k in range(1, VARINT_BYTES):
        extra = np.flatnonzero((old > k) & (new <= k))
        deletes.append(at[extra] + k)
    gone = np.sort(np.concatenate(deletes))
    if len(gone):
        buf = np.delete(buf, gone)
    places = np.concatenate(where)
    if len(places):
        order = np.argsort(places, kind="stable")
        places = places[order]
        buf = np.insert(buf, places - np.searchsorted(gone, places), np.concatenate(what)[order])
    return buf


DESCRIPTOR_KEY = b"\xe2\x03"  # TracePacket.track_descriptor (field 60, bytes)
DESCRIPTOR_UUID_KEY = P.DESCRIPTOR_UUID << 3
DESCRIPTOR_PARENT_KEY = P.DESCRIPTOR_PARENT_UUID << 3


def moved_descriptors(data: bytes, table: np.ndarray, drop: set[int], special: dict) -> bytes:
    """The track descriptor packets ``data`` with each uuid and parent uuid ``u`` replaced by
    ``table[u]`` (in numpy, as :func:`moved` moves events), those of a uuid in ``drop`` left
    out, and those of a uuid in ``special`` replaced by what ``special[uuid](packet body)``
    returns (a renamed track: written by the walker)."""
    starts, at = [], 0
    while at < len(data):  # a few thousand packets: their lengths walked
        starts.append(at)
        length, body = P.read_varint(data, at + 1)
        at = body + length
    if not starts:
        return b""
    a = padded(data)
    start = np.asarray(starts, np.int64)
    end = np.r_[start[1:], len(data)]
    body = start + 1 + _width(a, start + 1)
    if not ((a[body] == DESCRIPTOR_KEY[0]) & (a[body + 1] == DESCRIPTOR_KEY[1])).all():
        raise ValueError("a packet among the track descriptors that is not one")
    inner = body + 2
    inner_width = _width(a, inner)
    inner_end = inner + inner_width + _value(a, inner, inner_width)
    uuid = _field(a, inner + inner_width, inner_end, DESCRIPTOR_UUID_KEY)
    parent = _field(a, inner + inner_width, inner_end, DESCRIPTOR_PARENT_KEY)
    value = _value(a, uuid + 1, _width(a, uuid + 1))
    if (uuid < 0).any() or int(value.max()) >= len(table):
        raise ValueError("a track descriptor without a uuid the table knows")
    odd = np.isin(value, list(drop | set(special)))
    keep = np.flatnonzero(~odd)
    has_parent = keep[parent[keep] >= 0]
    parent_width = _width(a, parent[has_parent] + 1)
    new_uuid, new_parent = table[value[keep]], table[_value(a, parent[has_parent] + 1, parent_width)]
    if (new_uuid < 0).any() or (new_parent < 0).any():
        raise ValueError("a track kept whose uuid or parent the table leaves out")
    grow = np.zeros(len(start), np.int64)
    grow[keep] += _digits(new_uuid) - _width(a, uuid[keep] + 1)
    grow[has_parent] += _digits(new_parent) - parent_width
    inner_size = inner_end - inner - inner_width + grow
    grow_inner = _digits(inner_size) - inner_width
    packet_size = end - body + grow + grow_inner
    packet_width = _width(a, start + 1)
    changed = keep[grow[keep] != 0]
    at = np.concatenate([start[changed] + 1, inner[changed], uuid[keep] + 1, parent[has_parent] + 1])
    old = np.concatenate(
        [packet_width[changed], inner_width[changed], _width(a, uuid[keep] + 1), parent_width]
    )
    values = np.concatenate([packet_size[changed], inner_size[changed], new_uuid, new_parent])
    out = _edited(a[: len(data)].copy(), at, old, values, []).tobytes()
    if not odd.any():
        return out
    growth = packet_size - (end - body) + _digits(packet_size) - packet_width
    moved_start = start + np.r_[0, np.cumsum(growth)[:-1]]  # where each packet is in ``out``
    pieces, done = [], 0
    for index in np.flatnonzero(odd).tolist():
        begin = int(moved_start[index])
        pieces.append(out[done:begin])
        number = int(value[index])
        if number not in drop:
            packet = data[int(body[index]) : int(end[index])]
            pieces.append(P.encode([(P.TRACE_PACKET, 2, special[number](packet))]))
        done = begin + int(end[index] - start[index])
    return b"".join([*pieces, out[done:]])
