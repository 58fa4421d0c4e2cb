"""A big process's Perfetto export, by launches and CTA chunks, in the pool's workers.

NVIDIA's decoder exports a process's Perfetto trace on one core; here each launch (or each
CTA chunk of a big launch, :mod:`..chunks`) is exported by the pool's long-lived workers
side by side with the other tasks, within ``--jobs`` and within the memory the export made
whole would take (:meth:`...tasks.Task.most_at_once`). As soon as a launch's parts are done
it is planned (:class:`.join.Join`: the uuids its tracks take in the whole
trace) and its move jobs go to the same workers before any further export: they rewrite and
deflate the parts side by side (:func:`.parts.move`), each part moved by the
worker that keeps it in memory (where the whole export's memory allows all to keep theirs,
:meth:`...tasks.Task.may_hold`; else the part the join waits for, the others spooled and
moved by any worker). Once every launch is
moved, the ``.pftrace`` and ``.pftrace.gz`` are written from the moved sections by kernel
copies. A launch whose chunks do not join is exported whole. A part whose worker dies fails
this export alone, named by its launch (and chunk); nothing it wrote is left.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from ... import decoder
from ...schedule import Batch, checked
from ...tasks import Joined, Kept, Outcome, Task, pftrace_beside
from ..base import failed, part_failed
from ..launches import LaunchPart
from . import join as pftrace_join

if TYPE_CHECKING:
    from ..base import Run


def by_launches(run: Run, task: Task, launches: list[LaunchPart]) -> Outcome:
    """Export ``task`` (a Perfetto export) by its ``launches`` and join them."""
    start = time.monotonic()
    outputs = [task.out_dir / name for name in task.outputs()]
    temps = [decoder.temporary(path) for path in outputs]
    pftrace = next((t for t, o in zip(temps, outputs, strict=True) if not o.name.endswith(".gz")), None)
    gz = next((t for t, o in zip(temps, outputs, strict=True) if o.name.endswith(".gz")), None)
    parts = task.parts(len(launches))
    units = task.units([len(launch.chunks) or 1 for launch in launches])
    every = [unit for group in units for unit in group]
    # within a whole export's memory; after the JSON export's units, whose launches end in a
    # stitch and a merge, a longer tail than a part's move, which the Perfetto parts then cover
    most = task.most_at_once(len(every))
    batch = Batch(every, most, rank=1, hold=task.may_hold(len(every), min(run.jobs, most)))
    run.hand_out(task, batch)
    join = pftrace_join.Join(len(launches), pftrace=pftrace is not None, gz=gz is not None)
    moves: list = []  # (job, the future of its answer), in the order planned
    try:
        for number, (part, launch, group) in enumerate(zip(parts, launches, units, strict=True)):
            broken = _planned(run, join, number, part, launch, group, batch, moves)
            if broken is not None:
                return part_failed(task, broken, start, batch)
        for job, future in moves:
            answer = future.result()
            if not any(unit.job is job for unit in join.discarded):
                join.answered(job, checked(answer))
        with run.slots(urgent=True):
            join.write(pftrace, gz)
        for tmp, out in zip(temps, outputs, strict=True):
            os.replace(tmp, out)
    except (OSError, ValueError) as error:  # ValueError: a part the join cannot read, a worker ended
        return failed(run, task, start, error, outputs[0], "joining its launches")
    finally:
        batch.drained()  # no worker still writing a part's files when they are removed
        for path in [*temps, *join.leftovers()]:
            path.unlink(missing_ok=True)
        for unit in [*parts, *batch.futures]:
            _remove(unit)
    chunked = any(len(units) > 1 for units in join.launches)
    joined = {
        "parts": sum(len(units) for units in join.launches),
        "identity": "trace" if chunked else "bytes",
    }
    written = [out.name for out in outputs]
    return Outcome(task, time.monotonic() - start, written=written, split=Joined(joined=joined))


def _planned(
    run: Run, join: pftrace_join.Join, number: int, part: Task, launch: LaunchPart, group, batch, moves
) -> Outcome | None:
    """Plan one launch part by part as its parts are exported, each part's move handed to
    the workers at once (into ``moves``); the Outcome of the part that failed, else None.
    Chunks that do not join cost a whole export of the launch."""
    join.start(number, len(group))
    try:
        for unit, first in zip(group, launch.firsts if launch.chunks else [0], strict=True):
            batch.planning(unit)  # its worker, done, waits for its move
            done = batch.futures[unit].result()
            if done.cancelled or done.error:
                return done
            spool, kept = unit.out_dir / unit.outputs()[0], done.split
            described, holder = (kept.described, kept.holder) if isinstance(kept, Kept) else (None, None)
            job = join.add(spool, first, described, held=holder is not None)
            moves += zip([job], batch.first([job], holder), strict=True) if job else []
        join.end()
        return None
    except ValueError:
        if not launch.chunks:
            raise
    finally:
        batch.planning(None)
    for unit in group:  # the chunks' exports still running end before the launch's own
        batch.futures[unit].result()
    whole = run.whole(part)
    if whole.error or whole.cancelled:
        return whole
    join.start(number, 1)
    job = join.add(part.out_dir / part.outputs()[0])
    moves += zip([job], batch.first([job]), strict=True) if job else []
    join.end()
    return None


def _remove(unit: Task) -> None:
    """A part's manifest, spool and what its worker kept beside it."""
    unit.raw.unlink(missing_ok=True)
    spooled = unit.out_dir / unit.outputs()[0]
    for path in (spooled, *pftrace_beside(spooled)):
        path.unlink(missing_ok=True)
