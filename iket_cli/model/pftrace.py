"""One Perfetto timeline from several processes' ``.pftrace`` files.

A Perfetto trace is a sequence of ``TracePacket`` messages (field 1 of ``Trace``), so traces
concatenate. What must not collide is each trace's own numbering: track uuids
(``TrackDescriptor.uuid``/``parent_uuid``, ``TrackEvent.track_uuid``) and packet sequence
ids. Each source gets its own uuid and sequence space, its root track is renamed after
the process (host, rank, pid), and its timestamps can be shifted by an offset (captures
from hosts whose clocks differ). The wire format is walked directly; only these fields
are rewritten, everything else is copied as bytes.
"""

from __future__ import annotations

#: Field numbers (perfetto/protos/perfetto/trace/...).
TRACE_PACKET = 1
PACKET_TIMESTAMP = 8
PACKET_SEQUENCE_ID = 10
PACKET_TRACK_EVENT = 11
PACKET_TRACK_DESCRIPTOR = 60
DESCRIPTOR_UUID = 1
DESCRIPTOR_NAME = 2
DESCRIPTOR_PARENT_UUID = 5
DESCRIPTOR_SIBLING_ORDER_RANK = 12
EVENT_TRACK_UUID = 11

#: Each source's uuids and sequence ids are moved into a block of their own.
UUID_BLOCK = 1 << 40
SEQUENCE_BLOCK = 1 << 16


def read_varint(data: bytes, i: int) -> tuple[int, int]:
    """The varint at ``data[i]`` and the offset after it."""
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def encode_varint(value: int) -> bytes:
    """A protobuf varint; a negative value as int64's two's complement (ten bytes), as protobuf
    writes it (a trace's negative timestamp would otherwise never end the loop)."""
    if value < 0:
        value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message: ints for varints, bytes otherwise."""
    out, i = [], 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            size, i = read_varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire} at byte {i}")
        out.append((number, wire, value))
    return out


def encode(message: list[tuple[int, int, int | bytes]]) -> bytes:
    out = bytearray()
    for number, wire, value in message:
        out += encode_varint(number << 3 | wire)
        if wire == 0:
            out += encode_varint(int(value))
        elif wire == 2:
            out += encode_varint(len(value)) + bytes(value)
        else:
            out += bytes(value)
    return bytes(out)


def rewrite(message: bytes, changes: dict[int, object]) -> bytes:
    """``message`` with the listed fields replaced by a value or a function of the old one."""
    result = []
    for number, wire, value in fields(message):
        change = changes.get(number)
        if change is not None:
            value = change(value) if callable(change) else change
        result.append((number, wire, value))
    return encode(result)


def merge(sources: list[tuple[bytes, str, int]]) -> bytes:
    """One trace from ``(pftrace bytes, label, timestamp offset in ns)`` per process."""
    out = bytearray()
    for index, (data, label, offset) in enumerate(sources):
        base = index * UUID_BLOCK

        def uuid(value: int, base: int = base) -> int:
            return value + base

        def descriptor(body: bytes, base: int = base, label: str = label) -> bytes:
            parts = fields(body)
            is_root = not any(number == DESCRIPTOR_PARENT_UUID for number, _, _ in parts)
            changes: dict[int, object] = {
                DESCRIPTOR_UUID: lambda v: v + base,
                DESCRIPTOR_PARENT_UUID: lambda v: v + base,
            }
            if is_root:
                changes[DESCRIPTOR_NAME] = label.encode("utf-8")
            return rewrite(body, changes)

        packet_changes = {
            PACKET_TRACK_DESCRIPTOR: descriptor,
            PACKET_TRACK_EVENT: lambda body, uuid=uuid: rewrite(body, {EVENT_TRACK_UUID: uuid}),
            PACKET_SEQUENCE_ID: lambda v, index=index: v + index * SEQUENCE_BLOCK,
            PACKET_TIMESTAMP: lambda v, offset=offset: v + offset,
        }
        try:
            for number, wire, packet in fields(data):
                if number != TRACE_PACKET or wire != 2:
                    raise ValueError("not a Perfetto trace: top-level field other than TracePacket")
                out += encode([(TRACE_PACKET, 2, rewrite(packet, packet_changes))])
        except (ValueError, IndexError, TypeError) as error:  # damaged protobuf, any of its ways
            raise ValueError(f"{label}: {error}") from None
    return bytes(out)


# -- flows (arrows between slices) -------------------------------------------------------
DESCRIPTOR_CHILD_ORDER = 11
EVENT_TYPE = 9
EVENT_NAME = 23
EVENT_NAME_IID = 10
PACKET_INTERNED_DATA = 12
INTERNED_EVENT_NAMES = 2
EVENT_FLOW_IDS = 47  # repeated fixed64
EVENT_TERMINATING_FLOW_IDS = 48  # repeated fixed64
SLICE_BEGIN = 1

#: A slice as the decoder's trace places it: CTA (x, y, z), warp index, range name, start ns.
SliceKey = tuple[tuple[int, int, int], int, str, int]


def slice_index(data: bytes) -> dict[SliceKey, int]:
    """Each slice-begin packet of an IKET trace by its :data:`SliceKey` (ambiguous keys left out).

    The decoder's tracks nest ``Root / GridN / GPCg / TPCt|VSMs / CTA(x, y, z) / WarpNN``,
    with a child track per token-range name under a warp; a slice is named after its range,
    with ``(start_payload=..., end_payload=...)`` appended when it carries payloads. Names
    are read inline or, in a trace that interns them (a merged one may), through the
    ``event_names`` interned on the packet's sequence.
    """
    tracks: dict[int, tuple[str, int | None]] = {}
    events: list[tuple[int, int, int, str]] = []  # packet index, track uuid, ts, name
    interned: dict[tuple[int, int], bytes] = {}  # (sequence id, iid) -> name
    for index, (_, _, packet) in enumerate(fields(data)):
        parts = fields(packet)
        sequence = next((v for n, _, v in parts if n == PACKET_SEQUENCE_ID), 0)
        for number, _, value in parts:
            if number == PACKET_INTERNED_DATA:
                for n, _, entry in fields(value):
                    if n == INTERNED_EVENT_NAMES:
                        found = {k: v for k, _, v in fields(entry)}
                        interned[(sequence, found.get(1, 0))] = found.get(2, b"")
        for number, _, value in parts:
            if number == PACKET_TRACK_DESCRIPTOR:
                desc = {n: v for n, _, v in fields(value)}
                name = desc.get(DESCRIPTOR_NAME, b"")
                tracks[desc.get(DESCRIPTOR_UUID, 0)] = (
                    name.decode("utf-8", "replace") if isinstance(name, bytes) else "",
                    desc.get(DESCRIPTOR_PARENT_UUID),
                )
            elif number == PACKET_TRACK_EVENT:
                event = {n: v for n, _, v in fields(value)}
                name = event.get(EVENT_NAME)
                if name is None and EVENT_NAME_IID in event:
                    name = interned.get((sequence, event[EVENT_NAME_IID]))
                if event.get(EVENT_TYPE) == SLICE_BEGIN and isinstance(name, bytes):
                    ts = next((v for n, _, v in parts if n == PACKET_TIMESTAMP), 0)
                    events.append(
                        (index, event.get(EVENT_TRACK_UUID, 0), ts, name.decode("utf-8", "replace"))
                    )
    found: dict[SliceKey, int] = {}
    seen_twice: set[SliceKey] = set()
    for index, uuid, ts, name in events:
        place = _place(tracks, uuid)
        if place is None:
            continue
        key = (place[0], place[1], _base(name), ts)
        if key in found:
            seen_twice.add(key)
        found[key] = index
    return {key: index for key, index in found.items() if key not in seen_twice}


def _place(tracks: dict, uuid: int) -> tuple[tuple[int, int, int], int] | None:
    """(CTA, warp) of a track, from its ancestors' names."""
    cta = warp = None
    while uuid in tracks and (cta is None or warp is None):
        name, parent = tracks[uuid]
        if warp is None and name.startswith("Warp") and name[4:].isdigit():
            warp = int(name[4:])
        elif cta is None and name.startswith("CTA(") and name.endswith(")"):
            try:
                x, y, z = (int(p) for p in name[4:-1].split(","))
            except ValueError:
                return None
            cta = (x, y, z)
        uuid = parent
    return None if cta is None or warp is None else (cta, warp)


def _base(name: str) -> str:
    """A slice's range name, without the payload annotation the decoder appends."""
    at = name.find("(start_payload=")
    return name[:at] if at > 0 else name


def add_flows(data: bytes, links: list[tuple[SliceKey, SliceKey]]) -> tuple[bytes, int]:
    """``data`` with an arrow (a Perfetto flow) from each link's first slice to its second.

    Flow ids go on the slices' begin events: ``flow_ids`` on the source, ``terminating_flow_ids``
    on the target. Returns the new trace and the number of arrows placed (links whose slices
    are not both found are left out).
    """
    where = slice_index(data)
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    placed = 0
    for number, (source, target) in enumerate(links, start=1):
        if source in where and target in where:
            starts.setdefault(where[source], []).append(number)
            ends.setdefault(where[target], []).append(number)
            placed += 1
    out = bytearray()
    for index, (number, wire, packet) in enumerate(fields(data)):
        if index in starts or index in ends:
            extra = [(EVENT_FLOW_IDS, 1, i.to_bytes(8, "little")) for i in starts.get(index, [])]
            extra += [(EVENT_TERMINATING_FLOW_IDS, 1, i.to_bytes(8, "little")) for i in ends.get(index, [])]
            packet = rewrite(
                packet, {PACKET_TRACK_EVENT: lambda body, extra=extra: encode([*fields(body), *extra])}
            )
        out += encode([(number, wire, packet)])
    return bytes(out), placed
