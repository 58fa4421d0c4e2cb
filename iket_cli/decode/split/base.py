"""What a split export may ask of the decode that runs it, and what the two exports share.

A split export (:mod:`.json`, :mod:`.perfetto`) runs inside the pool's decode
(:class:`..pool.Decoding`) but names only this protocol: the ``--jobs`` slots, handing a
batch of its units and jobs out to the long-lived workers, a whole decode of one launch in a
worker (where its chunks do not join), and whether the decode is being cancelled. The pool
satisfies it; a split export never imports the pool.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..tasks import Outcome, Task

if TYPE_CHECKING:
    from ..schedule import Batch, Slots


class Run(Protocol):
    """The decode a split export runs in."""

    #: Decodes that may run at once (``--jobs``, within the memory).
    jobs: int
    #: One per decode running at once; ``urgent`` for the work that finishes a launch.
    slots: Slots

    @property
    def cancelled(self) -> bool:
        """Whether the decode is being stopped (an interrupt): a worker's error then is not
        the export's."""

    def hand_out(self, task: Task, batch: Batch) -> int:
        """Give ``batch`` to the workers; how many may write its jobs side by side."""

    def whole(self, part: Task) -> Outcome:
        """Decode ``part`` whole in a worker, in an urgent slot."""


def part_failed(task: Task, done: Outcome, start: float, batch: Batch) -> Outcome:
    """The task's outcome when one launch failed or was cancelled (the batch's other units
    and jobs end first)."""
    batch.drained()
    seconds = time.monotonic() - start
    if done.cancelled:
        return Outcome(task, seconds, cancelled=True)
    why = done.error.removeprefix(f"{done.task.raw}: ")  # named by the raw capture and launch
    return Outcome(task, seconds, error=f"{task.raw}:{done.task.which_launch}: {why}", errno=done.errno)


def failed(run: Run, task: Task, start: float, error: OSError | ValueError, out: Path, doing: str) -> Outcome:
    """The task's outcome when joining its launches raised: a write that failed (a full disk:
    its errno kept), or a part the join cannot read (``doing`` it), which is no failure of
    the export's own when the decode was cancelled (a worker writing it was stopped)."""
    seconds = time.monotonic() - start
    if isinstance(error, OSError):
        message = f"{error.strerror or error} writing {error.filename or out}"
        return Outcome(task, seconds, error=message, errno=error.errno)
    if run.cancelled:
        return Outcome(task, seconds, cancelled=True)
    return Outcome(task, seconds, error=f"{task.raw}: {doing}: {error}")
