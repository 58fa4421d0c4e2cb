"""How a decode's work is handed out: the ``--jobs`` slots, and the units and stitch jobs of
one split export, given in order to its long-lived workers (:mod:`..pool`).

A stitch or a merge finishes a launch, and its launch's later work waits on it, so it goes
before the next chunk: in the slots (:class:`Slots`, ``urgent``) and in the batch's queue
(:meth:`Batch.first`).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from concurrent.futures import Future

from ..tasks import Outcome, Task


class Slots:
    """The ``--jobs`` slots. The work that finishes a launch (a stitch, a merge) goes before
    the next chunk: with a plain semaphore the workers, taking chunk after chunk, won it
    every time and the first launch's stitch waited for the last chunk."""

    def __init__(self, count: int) -> None:
        self.free = count
        self.urgent = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def __call__(self, *, urgent: bool = False):
        with self._changed:
            self.urgent += urgent
            while not self.free or (self.urgent and not urgent):
                self._changed.wait()
            self.urgent -= urgent
            self.free -= 1
        try:
            yield
        finally:
            with self._changed:
                self.free += 1
                self._changed.notify_all()


class Batch:
    """The units of one split export, handed out in order to its long-lived workers, each
    with the future its launch waits on; a stitch's jobs (:class:`Pieces`) go first. The
    workers wait for more until the batch is over (:meth:`abandon`)."""

    def __init__(self, units: list[Task]) -> None:
        self.pending: deque = deque(units)
        self.futures: dict[Task, Future] = {unit: Future() for unit in units}
        self.abandoned = False
        self._changed = threading.Condition()

    def next(self) -> Task | Pieces | None:
        with self._changed:
            while not self.abandoned and not self.pending:
                self._changed.wait()
            return None if self.abandoned else self.pending.popleft()

    def first(self, jobs: list[dict]) -> list[Future]:
        """Hand out a stitch's ``jobs`` before any unit; the futures of their answers."""
        pieces = [Pieces(job) for job in jobs]
        with self._changed:
            if self.abandoned:  # nobody takes them: answered at once, never waited on
                for one in pieces:
                    one.future.set_result(None)
            else:
                self.pending.extendleft(reversed(pieces))
                self._changed.notify_all()
        return [one.future for one in pieces]

    def done(self, unit: Task, outcome: Outcome) -> None:
        self.futures[unit].set_result(outcome)

    def abandon(self) -> None:
        """Hand out nothing more; the units not started end as cancelled."""
        with self._changed:
            self.abandoned = True
            left, self.pending = list(self.pending), deque()
            self._changed.notify_all()
        for unit in left:
            if isinstance(unit, Pieces):
                unit.future.set_result(None)
            else:
                self.done(unit, Outcome(unit, 0.0, cancelled=True))


class Pieces:
    """One job of a launch's stitch (:func:`.stitch_jobs.write`) or of a Perfetto join
    (:func:`.pftrace_parts.move`) and the future of its answer."""

    def __init__(self, job: dict) -> None:
        self.job = job
        self.future: Future = Future()


class Writers:
    """What writes a stitch's jobs: the batch's workers, ``parts`` of them side by side. A job
    a worker could not write raises (:func:`checked`)."""

    def __init__(self, batch: Batch, parts: int) -> None:
        self.batch, self.parts = batch, parts

    def __call__(self, jobs: list[dict]) -> None:
        for future in self.batch.first(jobs):
            checked(future.result())


def checked(answer: dict | None) -> dict:
    """A worker's answer to a job, or the error it says: OSError with its errno and no file
    name (a full disk: the pool names the artifact, not the temporary file), ValueError
    otherwise (refused, or the worker ended)."""
    if answer is None:
        raise ValueError("a worker writing the launch ended")
    if answer.get("error") and answer.get("errno"):
        raise OSError(answer["errno"], answer["error"])
    if answer.get("error"):
        raise ValueError(answer["error"])
    return answer
