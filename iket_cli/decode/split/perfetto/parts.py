"""A part of a split Perfetto export, in its worker: exported and described, then moved.

A worker exports one launch, or one CTA chunk of a launch (:mod:`.chunks`), with NVIDIA's
decoder and describes it for the join (:func:`exported`): where its events begin, its tracks
(uuid, parent, name) in the order the decoder wrote them, and, for a chunk, the events on the
tracks it shares with the other chunks (its grid, GPCs and TPCs). A long-lived worker keeps the
part in memory for its move (:class:`Part`); a one-off worker, or one told to let it go, spools
it to files with its description beside it (:func:`spool`). Once the parts before it are
planned (:mod:`.join`), a job (:func:`move`) rewrites its descriptors and moves its
events to their uuids in the whole trace (:mod:`.events`), and deflates both for the
``.pftrace.gz``: so the bytes are moved and compressed by the workers side by side, not by the
process that joins them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ....model import pftrace as P
from . import events as events_mod
from . import gzip_parts
from .events import DROP, Packets, descriptors_end, moved, pieces
from .join import EVENTS, SHARED, TRACKS, shared_tracks
from .tracks import moved_descriptors, tracks
from .varints import PAD, padded


class Part(NamedTuple):
    """A part exported and described (:func:`exported`): the export with :data:`.varints.PAD`
    zero bytes after it (the one copy its move rewrites in place), its event packets as
    :func:`.events.find` finds them, and what the join needs to plan it."""

    padded: np.ndarray
    found: Packets  #: :func:`.events.compact`
    described: dict


def exported(decoder, *, chunk: bool) -> Part:
    """Export one part with ``decoder`` (closed once exported); ``chunk``: also keep the
    events on the tracks above its CTAs."""
    try:
        data = decoder.export_perfetto_trace()
    finally:
        decoder.close()
    begin = descriptors_end(data)
    described = {EVENTS: begin, TRACKS: tracks(data[:begin])}
    whole = padded(data)
    del data
    size = len(whole) - PAD
    packets = events_mod.find(whole[begin:], size - begin)
    if chunk:
        above = shared_tracks(described[TRACKS])
        events = memoryview(whole)[begin:size]
        described[SHARED] = [packet.hex() for packet in events_on(events, packets, above)]
    return Part(whole, events_mod.compact(packets), described)


def spool(part: Part, path: Path, sidecar: Path | None, found: Path) -> None:
    """Keep ``part`` in files for a move in any process: the export in ``path``, what the
    join needs in ``sidecar`` (JSON; None: the join was told), its event packets in ``found``."""
    path.write_bytes(memoryview(part.padded)[:-PAD])
    events_mod.save(found, part.found)
    if sidecar is not None:
        sidecar.write_text(json.dumps(part.described))


def events_on(events: bytes | memoryview, found: Packets, uuids: set[int]) -> list[bytes]:
    """The bodies of the event packets on the tracks ``uuids``, in order (``found``: the
    event packets of ``events``)."""
    if not len(events) or not uuids:
        return []
    wanted = np.isin(found.value, list(uuids))
    out = []
    for begin, stop, which in pieces(found, len(events)):
        if which is None:  # packets of other shapes, one by one
            for _, _, packet in P.fields(events[begin:stop]):
                event = next((v for n, _, v in P.fields(packet) if n == P.PACKET_TRACK_EVENT), b"")
                if next((v for n, _, v in P.fields(event) if n == P.EVENT_TRACK_UUID), None) in uuids:
                    out.append(bytes(packet))
            continue
        for index in (np.flatnonzero(wanted[which]) + which.start).tolist():
            packet = events[int(found.start[index]) : int(found.end[index])]
            out.append(bytes(next(value for _, _, value in P.fields(packet))))
    return out


def move(job: dict, part: Part | None = None) -> dict:
    """Write one part as the whole trace numbers it (a job planned by :mod:`.join`):
    its descriptors (those in ``drop`` left out, ``rename``'d ones renamed and ranked), then
    its events (those on the tracks ``silent`` left out), uuids looked up in its table; to
    ``job["out"]`` if given, deflated to ``job["deflated"]`` if given. ``part``: the part as
    this worker keeps it (else read from its spool; a job for a ``held`` part this worker no
    longer has raises ValueError). Returns the sizes of both sections (and, deflated, their
    sizes and checksums)."""
    if part is None and job.get("held"):
        raise ValueError("the worker that exported the part ended before its move: the part is lost")
    if part is None:
        whole = padded(Path(job["spool"]).read_bytes())
        found = events_mod.load(job["found"]) if job.get("found") else None
    else:
        whole, found = part.padded, events_mod.widened(part.found)
    begin, size = job["events"], len(whole) - PAD
    table = np.asarray(job["table"], np.int64)
    descriptors = _descriptors(memoryview(whole)[:begin], table, set(job["drop"]), job["rename"])
    on_events = table.copy()
    on_events[job["silent"]] = DROP
    # the kernel slices left out: planned from what the parts said of their shared tracks
    events, _ = moved(memoryview(whole)[begin:size], on_events, found, whole[begin:])
    sections = [descriptors, events]
    answer: dict = {"sizes": [len(s) for s in sections]}
    del whole, part
    if job.get("out"):
        with open(job["out"], "wb") as handle:
            handle.writelines(sections)
    if job.get("deflated"):
        answer["deflated"] = gzip_parts.deflate_to(Path(job["deflated"]), sections)
    return answer


def _descriptors(data: bytes, table: np.ndarray, drop: set[int], rename: dict) -> bytes:
    """The track descriptors in ``data`` as the whole trace has them: moved in numpy, the
    few renamed ones (a grid, a chunk's CTAs) rewritten by the walker."""
    special = {int(uuid): _renamer(table, name, rank) for uuid, (name, rank) in rename.items()}
    return moved_descriptors(data, table, drop, special)


def _renamer(table: np.ndarray, name: str, rank: int | None):
    def renamed(packet: bytes) -> bytes:
        body = next(value for number, _, value in P.fields(packet) if number == P.PACKET_TRACK_DESCRIPTOR)
        changes: dict[int, object] = {
            P.DESCRIPTOR_UUID: lambda v: int(table[v]),
            P.DESCRIPTOR_PARENT_UUID: lambda v: int(table[v]),
            P.DESCRIPTOR_NAME: name.encode("utf-8"),
        }
        if rank is not None:
            changes[P.DESCRIPTOR_SIBLING_ORDER_RANK] = rank
        return P.rewrite(packet, {P.PACKET_TRACK_DESCRIPTOR: P.rewrite(body, changes)})

    return renamed
