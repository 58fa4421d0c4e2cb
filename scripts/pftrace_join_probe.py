"""Probe for issue 35: how NVIDIA's decoder numbers a Perfetto export's tracks, and whether
per-launch exports join back into the whole one.

    python scripts/pftrace_join_probe.py RAW_MANIFEST [WHOLE.pftrace]

RAW_MANIFEST is a raw capture's ``iket.data.json`` with several decodable launches (for
example ``tests/fixtures/multi/iket/pid_0x23f/iket.data.json``, in a copy: the part manifests
are written beside it). Each launch is exported alone (the part manifests of the JSON split,
:func:`iket_cli.decode.split.join.part_manifests`), the parts are joined by the rule below,
written slowly with :mod:`iket_cli.model.pftrace`'s walker, and compared byte for byte with
the decoder's export of the whole capture (or WHOLE, run-iket's file).

The rule, as found on the fixtures: the decoder writes every track descriptor first, then every
event; uuids count up from 1 (``Root``) in the order it writes descriptors, so a part's tracks
are its launch's subtree numbered from 2; a launch's grid track is ``Grid<N>`` (N its place
among the decodable launches, zero-padded to the digits of the last) with ``sibling_order_rank``
N-1, and parts all say ``Grid1``/0. Joined: the first part's Root, each part's other descriptors
with their uuids (and parents other than Root) moved past the tracks before them and the grid
renamed and ranked, then each part's events with their track uuid moved the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from iket_cli.decode import decoder  # noqa: E402
from iket_cli.decode.split import join  # noqa: E402
from iket_cli.model import pftrace as P  # noqa: E402

ROOT_UUID = 1
SIBLING_ORDER_RANK = 12  # TrackDescriptor.sibling_order_rank


def _descriptor(packet: bytes) -> dict[int, object] | None:
    body = next((v for n, _, v in P.fields(packet) if n == P.PACKET_TRACK_DESCRIPTOR), None)
    return None if body is None else {n: v for n, _, v in P.fields(body)}


def first_event(data: bytes) -> int:
    """Where the events begin: the decoder writes every descriptor first."""
    at = 0
    while at < len(data):
        length, body = P._varint(data, at + 1)
        if data[body] != 0x40:  # not a packet that opens with a timestamp: a descriptor
            at = body + length
            continue
        return at
    return at


def event_starts(a):
    """Each event packet's offset in ``a`` (numpy bytes) whose opening is the usual one
    (packet with a one-byte length, 9-byte timestamp, sequence id 1, TrackEvent with type
    and track uuid), and the offset after it. Others (a name of 128 bytes or more) are not."""
    import numpy as np

    c = np.flatnonzero(a[:-20] == 0x0A)
    c = c[(a[c + 2] == 0x40) & (a[c + 12] == 0x50) & (a[c + 14] == 0x5A)]
    c = c[(a[c + 16] == 0x48) & (a[c + 18] == 0x58)]
    return c, c + 2 + a[c + 1]


def walked(events: bytes, offset: int) -> bytes:
    """``events`` with their track uuids moved, packet by packet (the slow, general way)."""
    moved = {P.EVENT_TRACK_UUID: lambda v: v + offset}
    change = {P.PACKET_TRACK_EVENT: lambda e: P._rewrite(e, moved)}
    return b"".join(
        P.encode([(P.TRACE_PACKET, 2, P._rewrite(packet, change))]) for _, _, packet in P.fields(events)
    )


def moved_events(events: bytes, offset: int) -> bytes:
    """``events`` with their track uuids moved: the runs of usual packets by
    :func:`moved_run`, the packets between them by :func:`walked`."""
    import numpy as np

    starts, ends = event_starts(np.frombuffer(events, np.uint8))
    breaks = np.flatnonzero(ends[:-1] != starts[1:])
    pieces, at = [], 0
    for first, last in zip(
        np.r_[0, breaks + 1].tolist(), np.r_[breaks, len(starts) - 1].tolist(), strict=True
    ):
        begin, end = int(starts[first]), int(ends[last])
        if begin < at:
            continue  # a candidate inside a packet already taken
        pieces += [
            walked(events[at:begin], offset),
            moved_run(events[begin:end], offset, starts[first : last + 1] - begin),
        ]
        at = end
    return b"".join([*pieces, walked(events[at:], offset)])


def moved_run(events: bytes, offset: int, c) -> bytes:
    """A run of usual event packets with every track uuid moved by ``offset``, in numpy: a
    uuid that gains a byte gets it inserted, its packet's and TrackEvent's lengths one more.
    ``c``: the packets' offsets in ``events``."""
    import numpy as np

    buf = np.frombuffer(events, np.uint8).copy()
    at = c + 19
    b = [buf[at + k].astype(np.int64) for k in range(3)]
    width = np.where(b[0] < 128, 1, np.where(b[1] < 128, 2, 3))
    value = (
        (b[0] & 127) | np.where(width > 1, (b[1] & 127) << 7, 0) | np.where(width > 2, (b[2] & 127) << 14, 0)
    )
    value += offset
    new_width = 1 + (value >= 1 << 7) + (value >= 1 << 14) + (value >= 1 << 21) + (value >= 1 << 28)
    gain = new_width - width
    if (buf[c + 1].astype(np.int64) + gain >= 128).any():
        raise ValueError("a packet would need a longer length")
    buf[c + 1] += gain.astype(np.uint8)
    buf[c + 15] += gain.astype(np.uint8)
    digits = [
        (((value >> (7 * k)) & 127) | np.where(new_width > k + 1, 128, 0)).astype(np.uint8) for k in range(5)
    ]
    for k in range(3):
        kept = width > k
        buf[(at + k)[kept]] = digits[k][kept]
    where, what = [], []
    for k in range(1, 5):
        added = (new_width > k) & (width <= k)
        where.append((at + width)[added])
        what.append(digits[k][added])
    where_all = np.concatenate(where)
    if len(where_all):
        order = np.argsort(where_all, kind="stable")
        buf = np.insert(buf, where_all[order], np.concatenate(what)[order])
    return buf.tobytes()


def joined(parts: list[bytes], fast: bool = False) -> bytes:
    """The whole export from its launches' exports, by the rule in the module docstring;
    ``fast``: each part's events moved by :func:`moved_events`, not packet by packet."""
    descriptors: list[bytes] = []
    events: list[bytes] = []
    before = 0  # tracks (other than Root) of the parts before this one
    width = len(str(len(parts)))  # grids are numbered with as many digits as the last needs
    for number, data in enumerate(parts):
        own = 0
        split = first_event(data) if fast else len(data)
        if fast:
            events.append(moved_events(data[split:], before) if before else data[split:])
        for _, _, packet in P.fields(data[:split]):
            found = _descriptor(packet)
            if found is None:
                moved = {P.EVENT_TRACK_UUID: lambda v, b=before: v + b}
                events.append(P._rewrite(packet, {P.PACKET_TRACK_EVENT: lambda e, m=moved: P._rewrite(e, m)}))
                continue
            if found[P.DESCRIPTOR_UUID] == ROOT_UUID:
                descriptors += [packet] if number == 0 else []
                continue
            own += 1
            changes: dict[int, object] = {
                P.DESCRIPTOR_UUID: lambda v, b=before: v + b,
                P.DESCRIPTOR_PARENT_UUID: lambda v, b=before: v if v == ROOT_UUID else v + b,
            }
            if found.get(P.DESCRIPTOR_PARENT_UUID) == ROOT_UUID:  # the launch's grid
                changes[P.DESCRIPTOR_NAME] = b"Grid%0*d" % (width, number + 1)
                changes[SIBLING_ORDER_RANK] = number
            moved_descriptor = {P.PACKET_TRACK_DESCRIPTOR: lambda d, c=changes: P._rewrite(d, c)}
            descriptors.append(P._rewrite(packet, moved_descriptor))
        before += own
    head = b"".join(P.encode([(P.TRACE_PACKET, 2, packet)]) for packet in descriptors)
    if fast:
        return head + b"".join(events)
    return head + b"".join(P.encode([(P.TRACE_PACKET, 2, packet)]) for packet in events)


def main() -> int:
    raw = Path(sys.argv[1])
    exporter = decoder.decoder_class()
    given = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    whole = given.read_bytes() if given else exporter(str(raw)).export_perfetto_trace()
    parts = join.part_manifests(raw, chunk_bytes=1 << 62)  # by launch only
    if not parts:
        print(f"{raw}: one decodable launch, nothing to join")
        return 0
    exports = [exporter(str(part.path)).export_perfetto_trace() for part in parts]
    for part in parts:
        part.path.unlink()
    import time

    same = True
    for fast in (False, True):
        start = time.perf_counter()
        result = joined(exports, fast=fast)
        seconds = time.perf_counter() - start
        same = same and result == whole
        print(
            f"{raw}: {len(parts)} launches, whole {len(whole)} bytes, joined {len(result)}, "
            f"identical: {result == whole}, {'numpy' if fast else 'walker'} join {seconds:.2f} s"
        )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
