"""Does iket's Perfetto trace from the JSON equal NVIDIA's export of the same capture?

    python3 scripts/perfetto_identity.py FOLDER...     (each holding iket_pid_*.pftrace and .trace.json)

One line per process: bytes equal, or the same events (track path, time, type, name,
annotations) in another order, or how many differ. Uses iket's own wire walker: no Perfetto
package needed (the GPU machine has none).
"""

import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iket_cli.model import trace as trace_mod
from iket_cli.model.pftrace import fields
from iket_cli.render import perfetto


def events(data: bytes) -> Counter:
    names, found = {}, Counter()
    for _, _, packet in fields(data):
        parts = {n: v for n, _, v in fields(packet)}
        if 60 in parts:
            d = {n: v for n, _, v in fields(parts[60])}
            names[d[1]] = (d.get(2, b""), d.get(5), d.get(11), d.get(12))
        elif 11 in parts:
            e = fields(parts[11])
            found[(parts.get(8), tuple(e))] += 1

    def path(uuid):
        out = []
        while uuid in names:
            name, parent, order, rank = names[uuid]
            out.append((name, order, rank))
            uuid = parent
        return tuple(reversed(out))

    return Counter(
        {
            (ts, path(dict((n, v) for n, _, v in e).get(11)), tuple(x for x in e if x[0] != 11)): c
            for (ts, e), c in found.items()
        }
    )


for folder in sys.argv[1:]:
    for pftrace in sorted(Path(folder).glob("iket_pid_*.pftrace")):
        if pftrace.name.endswith(".flows.pftrace"):
            continue
        theirs = pftrace.read_bytes()
        start = time.perf_counter()
        ours = perfetto.encode(
            trace_mod.load(pftrace.with_name(pftrace.name.replace(".pftrace", ".trace.json")))
        )
        took = time.perf_counter() - start
        if ours == theirs:
            verdict = "bytes equal"
        else:
            a, b = events(theirs), events(ours)
            verdict = (
                "same events"
                if a == b
                else f"DIFFER: {sum((a - b).values())} theirs only, {sum((b - a).values())} ours only"
            )
        print(f"{pftrace}: {len(theirs)} bytes; {verdict}; written in {took:.2f} s", flush=True)
