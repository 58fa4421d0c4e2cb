"""Moving a Perfetto part's events to other tracks: numpy against the packet walker (issue 35).

    python bench/bench_pftrace_move.py [--raw tests/fixtures/keep256_raw.tar.xz] [--walker-mb 2]

keep256's second launch is exported alone (as a worker of the split export does) and its
events moved past the first launch's tracks, as the join plans it: by
``decode.split.perfetto.events.moved`` (numpy, the whole part) and by a packet-by-packet
rewrite with ``model.pftrace``'s walker (the first ``--walker-mb`` MB of the part, scaled).
Both give the same bytes (checked on the walker's share). Prints MB/s of each and the ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from iket_cli.decode import decoder  # noqa: E402
from iket_cli.decode.split import launches as join  # noqa: E402
from iket_cli.decode.split.perfetto import events as pftrace_events  # noqa: E402
from iket_cli.model import pftrace as P  # noqa: E402


def walker(events: bytes, table: np.ndarray) -> bytes:
    """Each packet parsed and written again, its track uuid looked up."""
    out = []
    for _, _, packet in P.fields(events):
        moved = P.rewrite(
            packet,
            {
                P.PACKET_TRACK_EVENT: lambda body: P.rewrite(
                    body, {P.EVENT_TRACK_UUID: lambda v: int(table[v])}
                )
            },
        )
        out.append(P.encode([(P.TRACE_PACKET, 2, moved)]))
    return b"".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, default=ROOT / "tests" / "fixtures" / "keep256_raw.tar.xz")
    parser.add_argument("--walker-mb", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-bench-move-"))
    with tarfile.open(args.raw) as archive:
        archive.extractall(work, filter="data")
    raw = next(work.rglob("iket.data.json"))
    parts = join.part_manifests(raw, 1 << 62, "perfetto")
    exporter = decoder.decoder_class()
    first, second = (exporter(str(part.path)).export_perfetto_trace() for part in parts[:2])
    before = len(P.fields(first[: pftrace_events.descriptors_end(first)]))  # the first launch's tracks
    events = second[pftrace_events.descriptors_end(second) :]
    table = np.arange(1 << 20, dtype=np.int64) + before - 1
    numpy_s = min(_timed(lambda: pftrace_events.moved(events, table)) for _ in range(args.runs))
    found = pftrace_events.find(pftrace_events.padded(events), len(events))  # a packet's end near --walker-mb
    share = int(next((e for e in found.end.tolist() if e >= args.walker_mb * 1e6), len(events)))
    walker_s = _timed(lambda: walker(events[:share], table))
    assert walker(events[:share], table) == pftrace_events.moved(events[:share], table)[0]
    mb = len(events) / 1e6
    row = {
        "events_mb": round(mb, 1),
        "numpy_s": round(numpy_s, 3),
        "numpy_mb_s": round(mb / numpy_s, 1),
        "walker_mb_s": round(share / 1e6 / walker_s, 2),
    }
    row["ratio"] = round(row["walker_mb_s"] / row["numpy_mb_s"], 4)
    print(json.dumps(row))
    print("| part (MB of events) | numpy (s) | numpy (MB/s) | walker (MB/s) | numpy / walker time |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {row['events_mb']} | {row['numpy_s']} | {row['numpy_mb_s']} | {row['walker_mb_s']} "
        f"| {row['ratio']}x |"
    )
    return 0


def _timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
