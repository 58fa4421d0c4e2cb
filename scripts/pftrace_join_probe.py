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


def joined(parts: list[bytes]) -> bytes:
    """The whole export from its launches' exports, by the rule in the module docstring."""
    descriptors: list[bytes] = []
    events: list[bytes] = []
    before = 0  # tracks (other than Root) of the parts before this one
    width = len(str(len(parts)))  # grids are numbered with as many digits as the last needs
    for number, data in enumerate(parts):
        own = 0
        for _, _, packet in P.fields(data):
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
    return b"".join(P.encode([(P.TRACE_PACKET, 2, packet)]) for packet in descriptors + events)


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
    result = joined(exports)
    same = result == whole
    print(f"{raw}: {len(parts)} launches, whole {len(whole)} bytes, joined {len(result)}, identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
