"""The track descriptors of a Perfetto export, read and moved side by side in numpy.

NVIDIA's decoder writes every track descriptor (uuid, name, parent uuid) before every event:
a part of a split export is described by its tracks (:func:`tracks`, for the join's plan)
and its descriptors moved to the whole trace's uuids (:func:`moved_descriptors`), the few
renamed ones (a grid, a chunk's CTAs) by the protobuf walker.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ....model import pftrace as P
from . import varints as V
from .varints import padded

DESCRIPTOR_KEY = b"\xe2\x03"  # TracePacket.track_descriptor (field 60, bytes)
DESCRIPTOR_UUID_KEY = P.DESCRIPTOR_UUID << 3
DESCRIPTOR_PARENT_KEY = P.DESCRIPTOR_PARENT_UUID << 3
DESCRIPTOR_NAME_KEY = P.DESCRIPTOR_NAME << 3 | 2


class Descriptors(NamedTuple):
    """The track descriptor packets of a buffer, parsed side by side: where each packet,
    its body and its TrackDescriptor are, and where its uuid and parent uuid fields are."""

    a: np.ndarray  #: the buffer, padded
    start: np.ndarray
    end: np.ndarray
    body: np.ndarray
    inner: np.ndarray  #: the TrackDescriptor's length varint
    inner_width: np.ndarray
    inner_end: np.ndarray
    uuid: np.ndarray  #: the uuid field's key
    parent: np.ndarray  #: the parent uuid field's key, or -1
    value: np.ndarray  #: the uuid


def descriptors(data: bytes) -> Descriptors | None:
    """The track descriptor packets ``data`` parsed (None: there are none); ValueError when
    a packet is not a track descriptor. A uuid not found among the fields looked at is -1."""
    starts, at = [], 0
    while at < len(data):  # a few thousand packets: their lengths walked
        starts.append(at)
        length, body = P.read_varint(data, at + 1)
        at = body + length
    if not starts:
        return None
    a = padded(data)
    start = np.asarray(starts, np.int64)
    end = np.r_[start[1:], len(data)]
    body = start + 1 + V.widths(a, start + 1)
    if not ((a[body] == DESCRIPTOR_KEY[0]) & (a[body + 1] == DESCRIPTOR_KEY[1])).all():
        raise ValueError("a packet among the track descriptors that is not one")
    inner = body + 2
    inner_width = V.widths(a, inner)
    inner_end = inner + inner_width + V.values(a, inner, inner_width)
    uuid = V.field(a, inner + inner_width, inner_end, DESCRIPTOR_UUID_KEY)
    parent = V.field(a, inner + inner_width, inner_end, DESCRIPTOR_PARENT_KEY)
    value = np.where(uuid >= 0, V.values(a, uuid + 1, V.widths(a, uuid + 1)), -1)
    return Descriptors(a, start, end, body, inner, inner_width, inner_end, uuid, parent, value)


def tracks(data: bytes) -> list[list]:
    """[uuid, parent uuid (0: none), name] of each track descriptor in ``data``, in order."""
    found = descriptors(data)
    if found is None:
        return []
    a, first = found.a, found.inner + found.inner_width
    parents = np.zeros(len(found.start), np.int64)
    has = np.flatnonzero(found.parent >= 0)
    parents[has] = V.values(a, found.parent[has] + 1, V.widths(a, found.parent[has] + 1))
    name = V.field(a, first, found.inner_end, DESCRIPTOR_NAME_KEY)
    named = np.flatnonzero(name >= 0)
    width = V.widths(a, name[named] + 1)
    begin = name[named] + 1 + width
    stop = begin + V.values(a, name[named] + 1, width)
    names = [""] * len(found.start)
    for index, b, e in zip(named.tolist(), begin.tolist(), stop.tolist(), strict=True):
        names[index] = data[b:e].decode("utf-8")
    rows = [list(row) for row in zip(found.value.tolist(), parents.tolist(), names, strict=True)]
    odd = (name < 0) | (found.parent < 0) | (found.uuid < 0)  # none, or beyond the fields looked at
    for index in np.flatnonzero(odd).tolist():
        rows[index] = _walked_track(data[int(found.body[index]) : int(found.end[index])])
    return rows


def _walked_track(packet: bytes) -> list:
    body = next(value for number, _, value in P.fields(packet) if number == P.PACKET_TRACK_DESCRIPTOR)
    found = {number: value for number, _, value in P.fields(body)}
    name = bytes(found.get(P.DESCRIPTOR_NAME, b"")).decode("utf-8")
    return [found.get(P.DESCRIPTOR_UUID, 0), found.get(P.DESCRIPTOR_PARENT_UUID, 0), name]


def moved_descriptors(data: bytes, table: np.ndarray, drop: set[int], special: dict) -> bytes:
    """The track descriptor packets ``data`` with each uuid and parent uuid ``u`` replaced by
    ``table[u]`` (in numpy, as :func:`moved` moves events), those of a uuid in ``drop`` left
    out, and those of a uuid in ``special`` replaced by what ``special[uuid](packet body)``
    returns (a renamed track: written by the walker)."""
    found = descriptors(data)
    if found is None:
        return b""
    a, start, end, body, inner, inner_width, inner_end, uuid, parent, value = found
    if (uuid < 0).any() or int(value.max()) >= len(table):
        raise ValueError("a track descriptor without a uuid the table knows")
    odd = np.isin(value, list(drop | set(special)))
    keep = np.flatnonzero(~odd)
    has_parent = keep[parent[keep] >= 0]
    parent_width = V.widths(a, parent[has_parent] + 1)
    new_uuid, new_parent = table[value[keep]], table[V.values(a, parent[has_parent] + 1, parent_width)]
    if (new_uuid < 0).any() or (new_parent < 0).any():
        raise ValueError("a track kept whose uuid or parent the table leaves out")
    grow = np.zeros(len(start), np.int64)
    grow[keep] += V.digits(new_uuid) - V.widths(a, uuid[keep] + 1)
    grow[has_parent] += V.digits(new_parent) - parent_width
    inner_size = inner_end - inner - inner_width + grow
    grow_inner = V.digits(inner_size) - inner_width
    packet_size = end - body + grow + grow_inner
    packet_width = V.widths(a, start + 1)
    changed = keep[grow[keep] != 0]
    at = np.concatenate([start[changed] + 1, inner[changed], uuid[keep] + 1, parent[has_parent] + 1])
    old = np.concatenate(
        [packet_width[changed], inner_width[changed], V.widths(a, uuid[keep] + 1), parent_width]
    )
    values = np.concatenate([packet_size[changed], inner_size[changed], new_uuid, new_parent])
    out = V.edited(a[: len(data)].copy(), at, old, values, []).tobytes()
    if not odd.any():
        return out
    growth = packet_size - (end - body) + V.digits(packet_size) - packet_width
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
