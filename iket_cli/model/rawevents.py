"""The events a raw capture recorded, counted per name before the decoder pairs them.

run-iket's decoder drops what it cannot pair without a word: a ``range_start`` whose token
never reaches ``range_end``, a ``range_push`` never popped (seen on the H200 with
``scripts/cute_unmatched.py``: neither name is even in the trace's string table). Counting the
raw events per name and comparing them with the decoded ranges shows what was dropped; that
is :mod:`iket_cli.analysis.lint`'s ``unmatched`` check.

The layout read here is the one run-iket writes with its native-dump method (every CuTe
DSL and TIRx capture so far): each launch's data (``dataRef`` in ``iket.data.json``) is one
buffer of ``warpBufferSize`` bytes per warp — a u32 count of the bytes used, a u32 location,
the warp's start timestamp (two u32), then one u32 per event (its low 5 bits the event id,
the rest timestamp bits), each followed by its payload (4 bytes; 8 for 64-bit types), the
last one the warp's exit (the reserved id 0) unless the buffer filled up. That
layout is not a published interface, so it is read defensively: a capture that does not
parse exactly — every warp's events ending at its byte count, every id a known event — gives
``None``, never a guess, and the caller says nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import jsonio
from .vocab import PAYLOAD_WIDE

#: The native-dump method, the only one read here.
NATIVE_DUMP = 3
#: Event ids take the low 5 bits of a word (run-iket's ``maxEventId`` is 31 up to 30 names).
ID_BITS = 5
HEADER_WORDS = 4
#: ``eventPosition`` values: a mark, the start of a push/pop range, a pop, either end of a
#: token range (the same event starts and ends it).
MARK, PUSH, POP, START_END = 0, 1, 2, 4
#: Event id 0 is reserved (warp exit, sentinel tokens): never an annotation.
RESERVED_ID = 0


@dataclass
class RawEvents:
    """Per kernel name: how many events of each ``(event name, position)`` were recorded."""

    kernels: dict[str, Counter] = field(default_factory=dict)
    #: Warps whose buffer was full to the last byte: later events of theirs were lost.
    full_warps: int = 0


def read(raw_manifest: Path) -> RawEvents | None:
    """Count the raw events of one process's capture (``iket/pid_<hex>/iket.data.json``);
    ``None`` when it is missing, unreadable or not in the layout described above."""
    try:
        manifest = jsonio.read(raw_manifest)
        found = RawEvents()
        blobs: dict[str, bytes] = {}
        for launch in manifest["launches"]:
            context = manifest["decodeContexts"].get(launch["decodeContextId"])
            if context is None:
                continue  # a launch of a kernel without IKET annotations
            counts = _launch(raw_manifest.parent, launch, context, blobs, found)
            if counts is None:
                return None
            found.kernels.setdefault(launch["kernelName"], Counter()).update(counts)
        return found
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None


def _known_event(event_id: object, event: dict) -> bool:
    """An event description of the shape counted here: its id within the id bits, its name
    a string and its position an integer (a damaged raw capture may say anything)."""
    return (
        type(event_id) is int
        and 0 <= event_id < 1 << ID_BITS
        and isinstance(event.get("eventName"), str)
        and type(event.get("eventPosition")) is int
    )


def _launch(folder: Path, launch: dict, context: dict, blobs: dict, found: RawEvents) -> Counter | None:
    """One launch's ``(name, position)`` counts, or None where the layout is not the known one."""
    import numpy as np

    events = {e["eventId"]: e for e in context["events"]}
    if context["metaInfo"]["maxEventId"] != (1 << ID_BITS) - 1:
        return None
    if not all(_known_event(i, e) for i, e in events.items()):
        return None
    if any(e["instrumentMethod"] != NATIVE_DUMP for e in events.values()):
        return None
    ref, size = launch["dataRef"], launch["warpBufferSize"]
    if ref["filename"] not in blobs:
        with jsonio.open_regular(folder / ref["filename"]) as handle:  # a FIFO or /dev/zero: refused
            blobs[ref["filename"]] = handle.read()
    data = blobs[ref["filename"]][ref["offset"] : ref["offset"] + ref["size"]]
    if size <= 0 or size % 4 or len(data) != ref["size"] or len(data) % size:
        return None
    words = np.frombuffer(data, dtype="<u4").reshape(-1, size // 4)
    used = words[:, 0].astype(np.int64)
    if (used % 4).any() or (used > size).any() or ((used > 0) & (used < 4 * HEADER_WORDS)).any():
        return None
    ends = used // 4
    extra = np.zeros(1 << ID_BITS, dtype=np.int64)  # payload words after each event id
    known = np.zeros(1 << ID_BITS, dtype=bool)
    for event_id, event in events.items():
        known[event_id] = True
        if event["payloadType"]:
            extra[event_id] = 2 if event["payloadType"] in PAYLOAD_WIDE else 1
    tally = np.zeros(1 << ID_BITS, dtype=np.int64)
    position = np.where(ends > 0, HEADER_WORDS, 0)
    last = np.full(len(words), RESERVED_ID, dtype=np.int64)
    rows = np.arange(len(words))
    while True:  # one step per event, every warp at once
        live = position < ends
        if not live.any():
            break
        ids = (words[rows[live], position[live]] & ((1 << ID_BITS) - 1)).astype(np.int64)
        if not known[ids].all():
            return None
        tally += np.bincount(ids, minlength=1 << ID_BITS)
        position[live] += 1 + extra[ids]
        last[live] = ids
    if (position != ends).any() or (last[used < size] != RESERVED_ID).any():
        return None  # a payload width or an id misread: the layout is not the known one
    found.full_warps += int((used == size).sum())
    return Counter(
        {
            (events[i]["eventName"], events[i]["eventPosition"]): int(tally[i])
            for i in range(1 << ID_BITS)
            if tally[i] and i != RESERVED_ID
        }
    )
