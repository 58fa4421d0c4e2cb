"""The stage that bounds a pipelined kernel, said in one sentence with the figures.

Given the stage rows of :mod:`.stages`: among producers whose consumers waited for them
(``starved`` above one timer step), the busiest; where no consumer waited, among consumers
whose producers' output waited for them (``slack`` above one timer step), the busiest;
where no stage waited for another at all, every stage keeps pace with the others (a
balanced pipeline): the busiest, said as such; without a DAG, the busiest stage, named as
such. What the period would become were it as
fast as the next slowest stage: about that stage's work per instance; where that gains
less than :data:`NEARLY_BALANCED` of the period, the sentence says the stages are nearly
balanced (speeding up the bound alone would not help much).
"""

from __future__ import annotations

from ..model.units import duration
from ..model.vocab import TIMER_STEP_NS

#: A bound whose speed-up to the next slowest stage would shorten the period by less than
#: this share leaves a nearly balanced pipeline: every stage must get faster.
NEARLY_BALANCED = 0.1


def bounded(rows, edges: list[str]) -> tuple[str | None, str | None, float | None, str]:
    """(the bound stage's name, the stage that waits for it, the period were it as fast as the
    next slowest, the sentence); names None where no stage bounds the kernel."""
    by_name = {row.name: row for row in rows}
    waiting = [
        (src, dst)
        for label in edges
        for src, dst in [label.split(" -> ")]
        if by_name.get(dst) and (by_name[dst].starved_ns or 0) > TIMER_STEP_NS and src in by_name
    ]
    backed_up = [  # a producer's output waited for a busy consumer: that consumer bounds it
        (dst, src)
        for label in edges
        for src, dst in [label.split(" -> ")]
        if by_name.get(src) and (by_name[src].slack_ns or 0) > TIMER_STEP_NS and dst in by_name
    ]
    candidates = sorted(waiting, key=lambda pair: -(by_name[pair[0]].busy or 0))
    held = sorted(backed_up, key=lambda pair: -(by_name[pair[0]].busy or 0))
    producer = None
    if candidates:
        bound, consumer = by_name[candidates[0][0]], by_name[candidates[0][1]]
    elif held:
        bound, consumer, producer = by_name[held[0][0]], None, by_name[held[0][1]]
    elif rows and any(row.busy for row in rows):
        bound, consumer = max(rows, key=lambda row: row.busy or 0), None
    else:
        return None, None, None, unbound(edges)
    # as fast as the next slowest: the period becomes about that stage's work per instance
    others = [row.work_ns for row in rows if row is not bound and row.work_ns is not None]
    faster = max(others) if others else None
    where = f" on {bound.role}" if bound.role else ""
    said = f"bound by `{bound.name}`{where}: busy {(bound.busy or 0):.0%} of its warps' time"
    if consumer is not None:
        said += f"; `{consumer.name}` waits a median {duration(consumer.starved_ns)} per instance for it"
    elif producer is not None:
        said += (
            f"; `{producer.name}`'s output waits a median {duration(producer.slack_ns)} per instance for it"
        )
    elif edges:
        rest = ", ".join(f"`{row.name}` {(row.busy or 0):.0%}" for row in rows if row is not bound)
        said = (
            f"balanced: no stage waits for another longer than one timer step; the busiest is "
            f"`{bound.name}`{where}, busy {(bound.busy or 0):.0%} of its warps' time ({rest})"
        )
    else:
        said = (
            f"busiest stage `{bound.name}`{where} (no DAG: no stage is known to wait for it): "
            + said.split(": ", 1)[1]
        )
    if faster is not None and bound.period_ns is not None:
        said += (
            f"; were it as fast as the next slowest stage, the period would go from "
            f"{duration(bound.period_ns)} to about {duration(max(faster, 0))}"
        )
        gain = 1 - max(faster, 0) / bound.period_ns if bound.period_ns else 0.0
        if (consumer or producer) and gain < NEARLY_BALANCED:
            said += f", only {max(gain, 0):.0%} less: the stages are nearly balanced, all must get faster"
    return bound.name, consumer and consumer.name, faster, said


def unbound(edges: list[str]) -> str:
    if not edges:
        return "no stages: the kernel has no DAG and no warp roles"
    return "no stage bounds it: no consumer waited for its producer longer than one timer step"
