"""A Perfetto trace from the trace JSON alone, laid out as NVIDIA's decoder lays out its own.

An in-process window leaves a trace JSON and no raw capture, so NVIDIA's export
(``RawCaptureDecoder.export_perfetto_trace``) has nothing to read. This writes the same
trace from the JSON: the same tracks by their path of names, the same slices and instants at
the same times, with the same names and payload annotations (checked against run-iket's
``.pftrace`` of every fixture, ``tests/render/test_perfetto.py``). NVIDIA's layout, as read
from its exports (docs/perfetto-vs-json.md):

- ``Root`` → one track per launch that recorded anything, in the order the launches ran:
  ``Grid<n>`` (n counts those launches from 1, zero-padded to the widest), or for a CUDA
  graph replay ``GraphExec<g> Launch<k>`` → ``Node<j>: <kernel>, gridId: <id>``;
- under it ``GPC<g>`` → ``TPC<t>|VSM<s>`` → ``CTA(x, y, z)`` → ``Warp<nn>`` (a "Warp Life
  Time" slice), and under each warp ``StackedRanges`` (push/pop ranges, nested), one track
  per token range name (start/end ranges may overlap), and ``Marker`` (instants);
- a launch's slice ``kernel:<name>, gridId: <id>`` from its first warp's start to its last
  warp's end; a range of no duration is named ``<name> [duration=0]``; payloads are spelled
  in the name (``(payload=v)``, ``(start_payload=a, end_payload=b)``) and given as the debug
  annotations ``payload_type`` and ``payload_val``.

The protobuf is written by hand (field numbers of perfetto/protos/perfetto/trace/): no
Perfetto package at run time.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator

from ..model.pftrace import encode_varint as _varint
from ..model.trace import Launch, Trace

#: TrackDescriptor.child_ordering: LEXICOGRAPHIC, EXPLICIT (by sibling_order_rank).
LEXICOGRAPHIC, EXPLICIT = 1, 3
#: TrackEvent.type
SLICE_BEGIN, SLICE_END, INSTANT = 1, 2, 3
#: The sibling ranks NVIDIA gives a warp's own tracks (token range tracks count from 0).
STACKED_RANK, MARKER_RANK = 100, 200
#: The payload types' names as NVIDIA spells them in ``payload_type``.
PAYLOAD_NAMES = {
    1: "I8", 2: "UI8", 3: "I16", 4: "UI16", 5: "I32", 6: "UI32", 7: "I64", 9: "FP4", 10: "FP8",
    11: "FP16", 12: "BF16", 13: "FP32", 14: "FP64", 15: "Pointer", 16: "UI64",
}  # fmt: skip
PUSH_POP = 2
#: Floating-point payload types: their value is a double annotation.
FLOATS = {9, 10, 11, 12, 13, 14}
#: The packets' trusted_packet_sequence_id: one writer, one sequence.
SEQUENCE = 1


def _field(number: int, body: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value & 0xFFFFFFFFFFFFFFFF)


class _Tracks:
    """The track descriptors, numbered as they are first needed (uuid 1 is ``Root``)."""

    def __init__(self) -> None:
        self.packets: list[bytes] = []
        self.known: dict[tuple, int] = {}

    def track(self, key: tuple, name: str, parent: int | None, ordering: int, rank: int | None) -> int:
        uuid = self.known.get(key)
        if uuid is None:
            uuid = self.known[key] = len(self.known) + 1
            body = _int(1, uuid) + _field(2, name.encode())
            if parent is not None:
                body += _int(5, parent)
            body += _int(11, ordering)
            if rank is not None:
                body += _int(12, rank)
            self.packets.append(_field(1, _field(60, body)))
        return uuid


def _event(ts: int, kind: int, uuid: int, name: bytes, annotations: bytes = b"") -> bytes:
    """One TrackEvent packet: ``timestamp``, ``trusted_packet_sequence_id``, the event
    (``debug_annotations``, ``type``, ``track_uuid``, ``name``), as NVIDIA's export orders them."""
    body = annotations + _tail(kind, uuid, name)
    inner = b"\x40" + _timestamp(ts) + _SEQUENCE + b"\x5a" + _length(len(body)) + body
    return b"\x0a" + _length(len(inner)) + inner


#: ``trusted_packet_sequence_id`` (field 10) of every packet.
_SEQUENCE = _int(10, SEQUENCE)


def _timestamp(ts: int) -> bytes:
    """A timestamp's varint: GPU timestamps (ns since the epoch, 2**56 to 2**63) take nine
    bytes, spelled out at once; any other value the general way."""
    if not (1 << 56) <= ts < (1 << 63):
        return _varint(ts)
    return bytes(
        (ts & 127 | 128, ts >> 7 & 127 | 128, ts >> 14 & 127 | 128, ts >> 21 & 127 | 128,
         ts >> 28 & 127 | 128, ts >> 35 & 127 | 128, ts >> 42 & 127 | 128, ts >> 49 & 127 | 128, ts >> 56)
    )  # fmt: skip


def _length(size: int) -> bytes:
    """A length varint: one byte below 128 (nearly every event's)."""
    return bytes((size,)) if size < 0x80 else _varint(size)


@functools.lru_cache(maxsize=1 << 16)
def _tail(kind: int, uuid: int, name: bytes) -> bytes:
    """The event's type, track and name fields (a pure function of them: a track's few names
    repeat across its events, so each is encoded once)."""
    return _int(9, kind) + _int(11, uuid) + _field(23, name)


def _annotations(ptype: int, value: float) -> bytes:
    """``payload_type`` (a string) and ``payload_val`` (an int, a double for floating point)."""
    kind = PAYLOAD_NAMES.get(ptype, f"Unknown({ptype})").encode()
    number = _varint(5 << 3 | 1) + struct.pack("<d", value) if ptype in FLOATS else _int(4, int(value))
    typed = _field(6, kind) + _field(10, b"payload_type")
    return _field(4, typed) + _field(4, number + _field(10, b"payload_val"))


def _shown(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _where(location: dict, key: str) -> str:
    value = location.get(key)
    return str(value) if isinstance(value, int) and value >= 0 else "(ID not available)"


def _recorded(launch: Launch) -> bool:
    return bool(len(launch.warps) or len(launch.ranges) or len(launch.markers))


def _extent(launch: Launch) -> tuple[int, int]:
    """From the launch's first recorded time to its last."""
    starts = [*launch.warps.start, *launch.ranges.start, *launch.markers.start]
    ends = [*launch.warps.end, *launch.ranges.end, *launch.markers.start]
    return min(starts), max(ends)


def packets(trace: Trace) -> Iterator[bytes]:
    """The trace's packets: every track descriptor, then every event. Launches that recorded
    nothing have no track (as in NVIDIA's export); the others are numbered in the order they
    ran (a graph replay's nodes by their place in it)."""
    tracks = _Tracks()
    tracks.track(("root",), "Root", None, EXPLICIT, None)
    nodes: dict[str, int] = {}
    placed = []
    for launch in trace.launches:
        node = nodes[launch.graph] = nodes.get(launch.graph, -1) + 1 if launch.graph else 0
        if _recorded(launch):
            placed.append((_extent(launch), node, launch))
    placed.sort(key=lambda one: one[0][0])
    width = len(str(len(placed)))
    events: list[bytes] = []
    for rank, (extent, node, launch) in enumerate(placed):
        grid = _grid(tracks, launch, rank, width, node, extent, events)
        _Warps(trace, tracks, grid).events(launch, events)
    yield from tracks.packets
    yield from events


def _grid(
    tracks: _Tracks,
    launch: Launch,
    rank: int,
    width: int,
    node: int,
    extent: tuple[int, int],
    events: list[bytes],
) -> int:
    """The launch's track (a graph replay's and its node's), and its slice."""
    start, end = extent
    if launch.graph is None:
        grid = tracks.track(("grid", rank), f"Grid{rank + 1:0{width}d}", 1, LEXICOGRAPHIC, rank)
        name = f"kernel:{launch.kernel}, gridId: {launch.grid_id}".encode()
    else:
        exec_id, _, replay = launch.graph.removeprefix("graph_exec_").partition(":")
        title = f"GraphExec{exec_id} Launch{replay}"
        outer = tracks.track(("graph", launch.graph), title, 1, EXPLICIT, rank)
        events += _slice(start, end, outer, title.encode())
        label = f"Node{node}: {launch.kernel}, gridId: {launch.grid_id}"
        grid = tracks.track(("node", launch.graph, node), label, outer, LEXICOGRAPHIC, 0)
        name = f"kernel:{title} {label}".encode()
    events += _slice(start, end, grid, name)
    return grid


def _slice(start: int, end: int, track: int, name: bytes) -> list[bytes]:
    return [_event(start, SLICE_BEGIN, track, name), _event(end, SLICE_END, track, name)]


class _Warps:
    """One launch's warps: each warp's track (and its GPC, TPC|VSM and CTA above it) made
    when first needed, and the events on them."""

    def __init__(self, trace: Trace, tracks: _Tracks, grid: int) -> None:
        self.trace, self.tracks, self.grid = trace, tracks, grid
        self.known: dict[int, int] = {}
        self.named: dict[int, dict[str, int]] = {}

    def warp(self, loc: int) -> int:
        if loc not in self.known:
            where, track = self.trace.locations[loc], self.tracks.track
            gpc = track(
                (self.grid, where.get("gpcId")),
                f"GPC{_where(where, 'gpcId')}",
                self.grid,
                LEXICOGRAPHIC,
                None,
            )
            sm = f"TPC{_where(where, 'tpcId')}|VSM{_where(where, 'smId')}"
            tpc = track((gpc, sm), sm, gpc, EXPLICIT, None)
            x, y, z = where.get("ctaId", (0, 0, 0))
            cta = track((tpc, x, y, z), f"CTA({x}, {y}, {z})", tpc, EXPLICIT, None)
            warp_id = where.get("warpId", 0)
            self.known[loc] = track((cta, warp_id), f"Warp{warp_id:02d}", cta, EXPLICIT, warp_id)
        return self.known[loc]

    def range_track(self, loc: int, kind: int, name: str) -> int:
        """Push/pop ranges stack on ``StackedRanges``; token ranges get a track per name."""
        parent = self.warp(loc)
        if kind == PUSH_POP:
            return self.tracks.track(
                (parent, "stacked"), "StackedRanges", parent, LEXICOGRAPHIC, STACKED_RANK
            )
        mine = self.named.setdefault(parent, {})
        rank = mine.setdefault(name, len(mine))
        return self.tracks.track((parent, "range", name), name, parent, LEXICOGRAPHIC, rank)

    def events(self, launch: Launch, events: list[bytes]) -> None:
        on_track: dict[int, list[tuple[int, bytes, bytes, bytes]]] = {}
        r = launch.ranges
        payloads = len(r.ptype) == len(r)
        for i in range(len(r)):
            name = self.trace.name(r.name[i])
            track = self.range_track(r.loc[i], r.kind[i], name)
            began = ended = b""
            if payloads and (r.ptype[i] or r.ptype_end[i]):
                spelled = []
                if r.ptype[i]:
                    spelled.append(f"start_payload={_shown(r.pval[i])}")
                    began = _annotations(r.ptype[i], r.pval[i])
                if r.ptype_end[i]:
                    spelled.append(f"end_payload={_shown(r.pval_end[i])}")
                    ended = _annotations(r.ptype_end[i], r.pval_end[i])
                name += f"({', '.join(spelled)})"
            if r.start[i] == r.end[i]:
                name += " [duration=0]"
            on_track.setdefault(track, []).append((i, name.encode(), began, ended))
        for track, found in on_track.items():
            events += _nested(r.start, r.end, track, found)
        w = launch.warps
        for i in range(len(w)):
            events += _slice(w.start[i], w.end[i], self.warp(w.loc[i]), b"Warp Life Time")
        m = launch.markers
        payloads = len(m.ptype) == len(m)
        for i in range(len(m)):
            parent = self.warp(m.loc[i])
            track = self.tracks.track((parent, "marker"), "Marker", parent, LEXICOGRAPHIC, MARKER_RANK)
            name, annotations = self.trace.name(m.name[i]), b""
            if payloads and m.ptype[i]:
                name += f"(payload={_shown(m.pval[i])})"
                annotations = _annotations(m.ptype[i], m.pval[i])
            events.append(_event(m.start[i], INSTANT, track, name.encode(), annotations))


def _nested(start, end, track: int, found: list[tuple[int, bytes, bytes, bytes]]) -> list[bytes]:
    """One track's ranges as begin and end events in the order the warp recorded them: by
    start, the longer of two that start together first (it encloses the other), and each
    range ended before the next one that starts after it. Perfetto pairs a track's begins
    and ends by timestamp, then by this order: ranges that start or end together nest."""
    events: list[bytes] = []
    open_: list[tuple[int, bytes, bytes]] = []
    for i, label, began, ended in sorted(found, key=lambda one: (start[one[0]], -end[one[0]])):
        while open_ and end[open_[-1][0]] <= start[i]:
            closing, name, annotations = open_.pop()
            events.append(_event(end[closing], SLICE_END, track, name, annotations))
        events.append(_event(start[i], SLICE_BEGIN, track, label, began))
        open_.append((i, label, ended))
    while open_:
        closing, name, annotations = open_.pop()
        events.append(_event(end[closing], SLICE_END, track, name, annotations))
    return events


def encode(trace: Trace) -> bytes:
    """The Perfetto trace of ``trace``, serialised."""
    return b"".join(packets(trace))
