"""An independent recount of a pipelined capture from its trace JSON (issue 33, item 4).

Plain Python over the JSON that run-iket wrote, no iket code: which range fed which (from
what the kernel is known to do, not from iket's rules), and per stage the figures that
``iket show --pipeline`` prints. Used by ``scripts/gpu_pipeline.py`` on fresh H200 captures
and by ``tests/analysis/test_stages.py`` on the ones kept in ``tests/fixtures``.

A range is named by ``(launch, name, location, start)``; an arrow is ``(source, target)``.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import statistics
from collections import defaultdict
from pathlib import Path


def load(trace: Path) -> dict:
    return json.loads(Path(trace).read_text())


def ranges(doc: dict) -> dict:
    """Per (launch, CTA): per (name, location) the (start, end) of its ranges by start."""
    where, names = doc["locationTable"], doc["stringTable"]
    found: dict = defaultdict(lambda: defaultdict(list))
    for number, launch in enumerate(doc["launches"]):
        for r in launch["ranges"]:
            loc = r["warpLocIdxs"][0]
            cta = (number, tuple(where[loc]["ctaId"]))
            found[cta][(names[r["rangeNameIdx"]], loc)].append((r["startTs"], r["endTs"]))
    for cta in found.values():
        for spans in cta.values():
            spans.sort()
    return found


def _of(cta: dict, name: str) -> dict:
    return {loc: spans for (n, loc), spans in cta.items() if n == name}


def by_order(doc: dict, source: str, target: str) -> set:
    """A stage whose warps run equal counts: the k-th ``source`` on each of a CTA's source
    warps fed the k-th ``target`` on each of its target warps."""
    found = set()
    for (launch, _), cta in ranges(doc).items():
        sources, targets = _of(cta, source), _of(cta, target)
        assert len({len(v) for v in [*sources.values(), *targets.values()]}) == 1, "equal counts"
        for sw, src in sources.items():
            for tw, dst in targets.items():
                found |= {
                    ((launch, source, sw, s[0]), (launch, target, tw, t[0]))
                    for s, t in zip(src, dst, strict=True)
                }
    return found


def by_tile(doc: dict, swap: bool) -> set:
    """``examples/cute_round_robin.py``: warp 0's i-th ``load`` is tile 2i (2i + 1 with
    ``swap``), warp 1's the other of the pair; each consumer warp reduces ring A's tile, then
    ring B's, pair after pair."""
    where = doc["locationTable"]
    found = set()
    for (launch, _), cta in ranges(doc).items():
        tile_of_load = {}
        for loc, spans in _of(cta, "load").items():
            ring = where[loc]["warpId"]
            for i, span in enumerate(spans):
                tile_of_load[2 * i + (ring ^ int(swap))] = (launch, "load", loc, span[0])
        for loc, spans in _of(cta, "reduce").items():
            for j, span in enumerate(spans):
                pair, ring = divmod(j, 2)
                found.add((tile_of_load[2 * pair + (ring ^ int(swap))], (launch, "reduce", loc, span[0])))
    return found


#: The shapes of ``scripts/gpu_pipeline.py`` captured from ``examples/cute_round_robin.py``,
#: and whether their tiles are swapped; the others are ``examples/cute_pipeline.py``'s.
ROUND_ROBIN = {"rr-tile": False, "rr-stage-swap": True}


#: The recount's figures: the field of ``iket show --pipeline --format json`` each one is.
SHOWN = {
    "instances": "instances",
    "warps": "warps",
    "busy": "busy",
    "waiting": "waiting",
    "period": "period_ns",
    "work": "work_ns",
    "starved": "starved_ns",
    "slack": "slack_ns",
}


def for_shape(shape: str, doc: dict) -> set:
    """The arrows of a shape of ``scripts/gpu_pipeline.py``: by order for cute_pipeline.py's,
    by tile index for the round robin's (whose per-warp counts differ)."""
    if shape in ROUND_ROBIN:
        return by_tile(doc, swap=ROUND_ROBIN[shape])
    return by_order(doc, "load", "reduce")


def stages(doc: dict, names: list[str], arrows: set, wait: str = "wait*") -> dict:
    """Per stage: instances, warps, busy and waiting shares of its warps' lifetime, period,
    work per instance, and (from ``arrows``) the median starved and slack times. Medians are
    the lower middle of an even count (iket's nearest rank)."""
    life = {
        (number, w["locIdx"]): (w["startTs"], w["endTs"])
        for number, launch in enumerate(doc["launches"])
        for w in launch["warpLifetimes"]
    }
    spans: dict = defaultdict(dict)  # name -> (launch, loc) -> spans
    waits: dict = defaultdict(list)  # (launch, loc) -> wait spans
    for (launch, _), cta in ranges(doc).items():
        for (name, loc), found in cta.items():
            if fnmatch.fnmatchcase(name, wait):
                waits[(launch, loc)] += found
            elif name in names:
                spans[name][(launch, loc)] = found
    end_of = {
        (launch, name, loc, s): e for name in names for (launch, loc), v in spans[name].items() for s, e in v
    }
    out = {}
    for name in names:
        warps = spans[name]
        lifetime = sum(life[w][1] - life[w][0] for w in warps)
        inside = sum(
            max(0, min(e, we) - max(s, ws)) for w, v in warps.items() for s, e in v for ws, we in waits[w]
        )
        spent = sum(e - s for v in warps.values() for s, e in v)
        gaps = [b[0] - a[0] for v in warps.values() for a, b in itertools.pairwise(v)]
        count = sum(len(v) for v in warps.values())
        out[name] = {
            "instances": count,
            "warps": len(warps),
            "busy": (spent - inside) / lifetime,
            "waiting": sum(e - s for w in warps for s, e in waits[w]) / lifetime,
            "period": statistics.median_low(gaps) if gaps else None,
            "work": (spent - inside) / count,
            "starved": None,
            "slack": None,
        }
    previous = {}  # a target instance -> the end of the previous instance on its warp (or its start)
    for name in names:
        for (launch, loc), v in spans[name].items():
            before = life[(launch, loc)][0]
            for s, e in v:
                previous[(launch, name, loc, s)] = before
                before = e
    starved: dict = defaultdict(lambda: 0)
    slack: dict = {}
    for source, target in arrows:
        s_end, t_start, prev = end_of[source], target[3], previous[target]
        starved[target] = max(starved[target], max(0, min(s_end, t_start) - prev))
        kept = max(0, min(t_start, prev) - s_end)
        slack[source] = min(slack.get(source, kept), kept)
    for name in names:
        waited = [v for k, v in starved.items() if k[1] == name]
        kept = [v for k, v in slack.items() if k[1] == name]
        out[name]["starved"] = statistics.median_low(waited) if waited else None
        out[name]["slack"] = statistics.median_low(kept) if kept else None
    return out
