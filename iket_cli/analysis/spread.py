"""The run-to-run spread of a repeated capture (``iket profile --repeat N``).

A repeated capture holds each process once per repeat, under a new pid each time. Its
processes are matched across repeats by their place in the repeat (the first process of
repeat 2 is the first of repeat 1: the same command starts them in the same order), their
samples pooled for the usual statistics, and per range the per-repeat medians kept: their
minimum, maximum and coefficient of variation say how far one capture can be trusted, and
they are what ``iket diff`` tests (:mod:`.gate`). Repeats marked ``drifted`` or ``failed``
in the manifest are left out, and said to be.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import pooling
from ..model import trace as trace_mod
from ..model.folder import Beside, process_label
from ..model.trace import Trace
from .stats import stats

#: Repeat statuses whose samples count (pipeline.repeats: ok, drifted, failed).
COUNTED = ("ok",)


@dataclass
class Spread:
    """The per-repeat medians (ns) of one range: how much one capture moves run to run."""

    medians: list[int]
    min: int
    max: int
    cv: float | None  # standard deviation / mean of the medians; None with one repeat

    @classmethod
    def of(cls, medians: list[int]) -> Spread:
        mean = statistics.fmean(medians)
        cv = statistics.stdev(medians) / mean if len(medians) > 1 and mean else None
        return cls(list(medians), min(medians), max(medians), None if cv is None else round(cv, 4))


@dataclass
class Slot:
    """One process of the workload across the repeats that count."""

    label: str
    path: Path  # the trace of its first counted repeat
    context: Beside
    traces: list[Trace] = field(default_factory=list)
    repeats: list[int] = field(default_factory=list)


def repeated(record: dict[str, Any] | None) -> bool:
    """Whether a manifest is that of a repeated capture."""
    return bool(record) and len(record.get("repeats") or []) > 1


def excluded(record: dict[str, Any]) -> list[str]:
    """``repeat 3 (drifted: ...)`` for each repeat whose samples do not count."""
    return [
        f"repeat {r['index']} ({r['status']}: {(r['drift'] or [r['error']])[0]})"
        for r in record.get("repeats") or []
        if r["status"] not in COUNTED
    ]


def slots(loaded: list[tuple[str, Path, Trace, Beside]], record: dict[str, Any]) -> list[Slot]:
    """The loaded traces of a repeated capture, grouped by their process's place in its repeat."""
    counted = {r["index"] for r in record.get("repeats") or [] if r["status"] in COUNTED}
    seen: dict[int, int] = {}  # repeat -> processes seen so far
    found: dict[tuple, Slot] = {}
    for label, path, trace, context in loaded:
        process = context.process or {}
        repeat = process.get("repeat", 1)
        if repeat not in counted:
            continue
        place = seen.get(repeat, 0)
        seen[repeat] = place + 1
        key = (process.get("folder"), place)
        if key not in found:  # labelled as its process, without the repeat
            found[key] = Slot(process_label({**process, "repeat": None}) if process else label, path, context)
        found[key].traces.append(trace)
        found[key].repeats.append(repeat)
    return list(found.values())


def spreads(traces: list[Trace]) -> dict[tuple[str, str], Spread]:
    """Per (kernel, range name): the spread of its median over ``traces`` (one per repeat;
    already filtered). A range missing from a repeat has no median there."""
    import numpy as np

    medians: dict[tuple[str, str], list[int]] = {}
    for trace in traces:
        durations: dict[tuple[str, str], list] = {}
        for launch in trace.launches:
            r = launch.ranges
            if not len(r):
                continue
            names = np.asarray(r.name, dtype=np.int64)
            took = np.asarray(r.end, dtype=np.int64) - np.asarray(r.start, dtype=np.int64)
            for index in np.unique(names):
                key = (launch.kernel, trace.name(int(index)))
                durations.setdefault(key, []).append(took[names == index])
        for key, parts in durations.items():
            medians.setdefault(key, []).append(stats(np.concatenate(parts)).p50)  # as iket show's
    return {key: Spread.of(values) for key, values in medians.items()}


def pooled(slot: Slot, filters: dict[str, Any]) -> tuple[Trace, dict[tuple[str, str], Spread]]:
    """The slot's repeats, each filtered, as one trace; and each range's spread."""
    chosen = [trace_mod.select(trace, **filters) for trace in slot.traces]
    return pooling.pooled(chosen), spreads(chosen)
