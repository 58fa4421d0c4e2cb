"""Whether an opened capture's numbers are whole, as a gate must know it: from its manifest's
completeness record where that record checked something, else from the traces themselves.

A gate (``iket diff --fail-over``, ``iket run --baseline``, the pytest plugin's) never passes
on numbers that miss what IKET lost, and never passes without a word on numbers nobody could
judge: a bare trace, a capture made before iket kept a completeness record, a record that
checked nothing (run-iket's own folder) are judged from their traces (:func:`from_trace`:
warps that left no lifetime), and called unknown where even that cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import trace as trace_mod
from ..model.completeness import headline
from ..model.reading import Opened
from .completeness import from_trace

COMPLETE, INCOMPLETE, UNKNOWN = "complete", "incomplete", "unknown"


@dataclass(frozen=True)
class Judged:
    """One capture's verdict: ``state`` (complete, incomplete, unknown), the line that says it
    (None where it is complete) and a note where the traces alone judged it."""

    state: str
    line: str | None = None
    note: str | None = None


def judge(opened: Opened) -> Judged:
    """The capture's verdict: its record's losses, and what its traces show by themselves (each
    read for its warps' lifetimes alone: a record damaged or made before a loss could be seen
    never hides one); complete where the record checked a source or the traces can tell."""
    record = opened.manifest
    found = (record or {}).get("completeness")
    said = headline(record)
    losses, judgeable = [], False
    for seen in opened.found:
        trace = trace_mod.load(seen.path, ("warps",))
        judgeable = judgeable or any(not launch.single_cluster for launch in trace.launches)
        losses += from_trace(trace)
    if said:
        return Judged(INCOMPLETE, said)
    if losses:
        more = f" (and {len(losses) - 1} more loss(es): iket lint)" if len(losses) > 1 else ""
        return Judged(INCOMPLETE, f"INCOMPLETE: {losses[0]['message']}; {losses[0]['fix']}{more}")
    if isinstance(found, dict) and found.get("checked"):
        return Judged(COMPLETE)
    if judgeable:
        return Judged(COMPLETE, note="no completeness record: judged from its traces alone")
    why = "no completeness record, and its traces cannot show a loss by themselves"
    return Judged(UNKNOWN, f"completeness unknown: {why}")
