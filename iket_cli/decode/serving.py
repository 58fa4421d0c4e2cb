"""The long-lived workers of one decode, shared by every split export in it.

A split export (a JSON export by launches and CTA chunks, a Perfetto export by parts) hands
its units and its stitch or join jobs out as a :class:`.split.plan.Batch`; every batch of the
decode goes to one queue (:class:`.split.plan.Queue`) and one set of long-lived workers
(:class:`.workers.Server`), no more than ``--jobs``. With ``--format all`` the JSON and the
Perfetto exports of a process so share their workers: each worker is started once, and its
memory, faulted in by its first unit, serves the units of both (they were two sets of workers,
each started and each faulting in its memory).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from .split.plan import Batch, Pieces, Queue, Slots
from .tasks import Outcome, Progress
from .workers import Workers


class Serving:
    """The queue of a decode's batches and the threads that each drive one worker."""

    def __init__(self, workers: Workers, slots: Slots, progress: Progress, lock: threading.Lock, jobs: int):
        self.workers, self.slots, self.progress, self.lock, self.jobs = workers, slots, progress, lock, jobs
        self.queue = Queue()
        self.count = 0
        self._threads = ThreadPoolExecutor(max_workers=jobs)

    def hand_out(self, batch: Batch) -> int:
        """Give ``batch`` to the workers (more started as the work that may run at once needs
        them, within ``--jobs``); how many of them may write its jobs side by side. If the
        decode is being shut down (an interrupt), the batch is abandoned first."""
        try:
            with self.lock:
                wanted = min(self.jobs, self.queue.add(batch))
                for _ in range(wanted - self.count):
                    self._threads.submit(self.serve)
                    self.count += 1
        except RuntimeError:  # "cannot schedule new futures after shutdown"
            batch.abandon()
            raise
        return max(1, min(self.jobs, batch.most, len(batch.futures)))

    def serve(self) -> None:
        """One worker decoding units and writing jobs of any batch, one slot at a time, until
        the decode is over (its memory reused from one to the next)."""
        server = self.workers.server()
        batch = unit = ended = None
        try:
            while (taken := self.queue.next(server, ended)) is not None:
                batch, unit = taken
                ended = None
                if isinstance(unit, Pieces):
                    with self.slots(urgent=True):
                        batch.answered(unit, None if self.workers.cancelled else server.pieces(unit.job))
                    continue
                with self.slots():
                    if self.workers.cancelled or batch.abandoned:
                        batch.done(unit, Outcome(unit, 0.0, cancelled=True))
                        continue
                    with self.lock:
                        self.progress.started(unit)
                    outcome = server.decode(unit)
                    if outcome.holder is not None and not batch.keeps(unit):
                        outcome = server.spool(outcome)
                with self.lock:
                    self.progress.finished(outcome)
                batch.done(unit, outcome)
                ended, unit = ((batch, unit) if outcome.holder is not None else None), None
        except BaseException as error:  # a bug here: its launch fails, nothing waits for ever
            if isinstance(unit, Pieces) and not unit.future.done():
                batch.answered(unit, None)
            elif unit is not None and not batch.futures[unit].done():
                batch.done(unit, Outcome(unit, 0.0, error=f"{unit.raw}: {error!r}"))
            if batch is not None:
                batch.abandon()
            raise
        finally:
            server.close()

    def close(self, *, cancel: bool = False) -> None:
        """The decode is over (or interrupted: ``cancel``): nothing more is handed out, what
        was not is cancelled, and every worker ends."""
        self.queue.close()
        self._threads.shutdown(wait=True, cancel_futures=cancel)
