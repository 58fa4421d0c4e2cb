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
EVENT_TRACK_UUID = 11

#: Each source's uuids and sequence ids are moved into a block of their own.
UUID_BLOCK = 1 << 40
SEQUENCE_BLOCK = 1 << 16


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _encode_varint(value: int) -> bytes:
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
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
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
        out += _encode_varint(number << 3 | wire)
        if wire == 0:
            out += _encode_varint(int(value))
        elif wire == 2:
            out += _encode_varint(len(value)) + bytes(value)
        else:
            out += bytes(value)
    return bytes(out)


def _rewrite(message: bytes, changes: dict[int, object]) -> bytes:
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
            return _rewrite(body, changes)

        packet_changes = {
            PACKET_TRACK_DESCRIPTOR: descriptor,
            PACKET_TRACK_EVENT: lambda body, uuid=uuid: _rewrite(body, {EVENT_TRACK_UUID: uuid}),
            PACKET_SEQUENCE_ID: lambda v, index=index: v + index * SEQUENCE_BLOCK,
            PACKET_TIMESTAMP: lambda v, offset=offset: v + offset,
        }
        for number, wire, packet in fields(data):
            if number != TRACE_PACKET or wire != 2:
                raise ValueError("not a Perfetto trace: top-level field other than TracePacket")
            out += encode([(TRACE_PACKET, 2, _rewrite(packet, packet_changes))])
    return bytes(out)
