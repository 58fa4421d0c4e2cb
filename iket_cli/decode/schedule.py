"""How a decode's work is handed out: the ``--jobs`` slots, the units and stitch or join jobs
of each split export (:class:`Batch`), the queue that gives every batch's, in order, to the
decode's long-lived workers (:class:`Queue`), and the threads that drive those workers
(:class:`Serving`).

A stitch or a merge finishes a launch, and its launch's later work waits on it, so it goes
before the next chunk: in the slots (:class:`Slots`, ``urgent``) and in the queue
(:meth:`Batch.first`: any batch's jobs before any unit). A Perfetto part's move goes to the
worker that keeps the part in its memory (:attr:`Pieces.holder`); the others pass it over.

Every split export of one decode shares one queue and one set of long-lived workers
(:class:`.workers.Server`), no more than ``--jobs``. With ``--format all`` the JSON and the
Perfetto exports of a process so share their workers: each worker is started once, and its
memory, faulted in by its first unit, serves the units of both (they were two sets of
workers, each started and each faulting in its memory).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

from .tasks import Outcome, Progress, Task
from .workers import Workers


class Slots:
    """The ``--jobs`` slots, given in the order asked for. The work that finishes a launch (a
    stitch, a merge) goes before the next chunk: with a plain semaphore the workers, taking
    chunk after chunk, won it every time and the first launch's stitch waited for the last
    chunk. Chunks go first come, first served: a worker that had taken the next part and
    waited for a slot lost it, again and again, to the workers that freed one and asked at
    once, and the Perfetto join, which plans parts in order, waited for that part
    (docs/history/benchmarks.md, "Slots in the order asked for")."""

    def __init__(self, count: int) -> None:
        self.free = count
        #: Who waits, urgent and not, each line in the order asked.
        self._lines: dict[bool, deque[object]] = {True: deque(), False: deque()}
        self._changed = threading.Condition()

    def _mine(self, ticket: object, urgent: bool) -> bool:
        """Whether ``ticket`` takes the next free slot (the caller holds the condition)."""
        return bool(self.free) and self._lines[urgent][0] is ticket and (urgent or not self._lines[True])

    @contextlib.contextmanager
    def __call__(self, *, urgent: bool = False):
        ticket, line = object(), self._lines[urgent]
        with self._changed:
            line.append(ticket)
            try:
                while not self._mine(ticket, urgent):
                    self._changed.wait()
                self.free -= 1
            finally:  # taken, or given up (an interrupt): out of the line either way
                line.remove(ticket)
                self._changed.notify_all()  # the next in line may take a slot still free
        try:
            yield
        finally:
            with self._changed:
                self.free += 1
                self._changed.notify_all()


class Batch:
    """The units of one split export, handed out in order to the decode's long-lived workers
    (:class:`Queue`), each with the future its launch waits on; its stitch or join jobs
    (:class:`Pieces`) go first. No more than ``most`` of its units run at once; the units of
    batches of a lower ``rank`` go first."""

    def __init__(
        self, units: list[Task], most: int | None = None, rank: int = 0, *, hold: bool = True
    ) -> None:
        self.pending: deque[Task] = deque(units)
        #: Jobs handed out, taken before any unit (:meth:`first`).
        self.pieces: deque[Pieces] = deque()
        self.futures: dict[Task, Future] = {unit: Future() for unit in units}
        self.most = most or len(units) or 1
        self.rank = rank
        self.abandoned = False
        #: The unit whose answer the join waits for to plan it next (:meth:`planning`).
        self.planned_next: Task | None = None
        #: Whether a worker may keep its part (a Perfetto export's) while it exports the next
        #: (:meth:`keeps`); the part the join waits for is kept whatever this says.
        self.hold = hold
        #: Units and jobs handed out and not yet answered.
        self.running = self.jobs = 0
        self._changed = threading.Condition()

    def share(self, changed: threading.Condition) -> None:
        """Tell ``changed`` (the queue's) of every change, not a condition of its own."""
        self._changed = changed

    def job(self, holder: object = None) -> Pieces | None:
        """Take the next job ``holder`` may write: one for no worker in particular, or one
        for the part ``holder`` keeps (the caller holds the condition)."""
        if self.abandoned:
            return None
        for one in self.pieces:
            if one.holder is None or one.holder is holder:
                self.pieces.remove(one)
                self.jobs += 1
                return one
        return None

    def unit(self) -> Task | None:
        """Take the next unit if one may start now (the caller holds the condition)."""
        if self.abandoned or not self.pending or self.running >= self.most:
            return None
        self.running += 1
        return self.pending.popleft()

    def planning(self, unit: Task | None) -> None:
        """The join waits for ``unit`` to plan it next (None: for none): the worker that ends
        it waits for its move (:meth:`Queue.next`) rather than start another unit first."""
        with self._changed:
            self.planned_next = unit
            self._changed.notify_all()

    def keeps(self, unit: Task) -> bool:
        """Whether the worker that exported ``unit`` keeps its part for the move: it may hold
        parts (:attr:`hold`), or the join waits for this one (it then waits for the move,
        exporting nothing meanwhile). Else the part is spooled, and moved by any worker."""
        with self._changed:
            return self.hold or self.planned_next is unit

    def first(self, jobs: list[dict], holder: object = None) -> list[Future]:
        """Hand out a stitch's ``jobs`` before any unit (``holder``: only to that worker, which
        keeps what they need); the futures of their answers."""
        pieces = [Pieces(job, holder) for job in jobs]
        with self._changed:
            if self.abandoned:  # nobody takes them: answered at once, never waited on
                for one in pieces:
                    one.future.set_result(None)
            else:
                self.pieces.extendleft(reversed(pieces))
                self._changed.notify_all()
        return [one.future for one in pieces]

    def done(self, unit: Task, outcome: Outcome) -> None:
        """A unit handed out has ended."""
        with self._changed:
            self.running -= 1
            self._changed.notify_all()
        self.futures[unit].set_result(outcome)

    def answered(self, pieces: Pieces, answer: dict | None) -> None:
        """A job handed out has been answered (None: its worker ended)."""
        with self._changed:
            self.jobs -= 1
            self._changed.notify_all()
        pieces.future.set_result(answer)

    def abandon(self) -> None:
        """Hand out nothing more; the units not started end as cancelled."""
        with self._changed:
            self.abandoned = True
            left, self.pending = [*self.pieces, *self.pending], deque()
            self.pieces = deque()
            self._changed.notify_all()
        for unit in left:
            if isinstance(unit, Pieces):
                unit.future.set_result(None)
            else:
                self.futures[unit].set_result(Outcome(unit, 0.0, cancelled=True))

    def drained(self) -> None:
        """Abandon the batch and wait until no worker still runs its units or jobs (their
        files can then be removed)."""
        self.abandon()
        with self._changed:
            self._changed.wait_for(lambda: not self.running and not self.jobs)


class Queue:
    """The batches of one decode, handed out to one set of long-lived workers: any batch's
    jobs first (each finishes a launch), then units, batch by batch by rank, then in the
    order added."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.closed = False
        self._changed = threading.Condition()

    def add(self, batch: Batch) -> int:
        """Hand out ``batch`` too; the units that may now run at once, over all batches."""
        with self._changed:
            batch.share(self._changed)
            kept = [b for b in self.batches if not b.abandoned] + [batch]
            self.batches = sorted(kept, key=lambda b: b.rank)  # stable: the order added, by rank
            self._changed.notify_all()
            return sum(min(len(b.pending) + b.running, b.most) for b in self.batches)

    def next(
        self, holder: object = None, ended: tuple[Batch, Task] | None = None
    ) -> tuple[Batch, Task | Pieces] | None:
        """The next unit or job and its batch for the worker ``holder`` (the jobs meant for
        another worker passed over: it takes them when its unit ends), waiting for one; None
        once closed. ``ended``: the unit it just ended, whose move it waits for while the join
        plans that unit (a move that waited for the worker's next export held up the last)."""
        with self._changed:
            while not self.closed:
                for batch in self.batches:
                    if (job := batch.job(holder)) is not None:
                        return batch, job
                if ended is None or ended[0].abandoned or ended[0].planned_next is not ended[1]:
                    for batch in self.batches:
                        if (unit := batch.unit()) is not None:
                            return batch, unit
                self._changed.wait()
            return None

    def close(self) -> None:
        """Hand out nothing more: the workers waiting end, and the units of every batch not
        yet handed out end as cancelled."""
        with self._changed:
            self.closed = True
            batches = list(self.batches)
            self._changed.notify_all()
        for batch in batches:
            batch.abandon()


class Pieces:
    """One job of a launch's stitch (:func:`.stitch_jobs.write`) or of a Perfetto join
    (a part's move) and the future of its answer; ``holder``: the one worker
    that can write it (it keeps the part the job moves), or None."""

    def __init__(self, job: dict, holder: object = None) -> None:
        self.job = job
        self.holder = holder
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
                    if outcome.kept is not None and not batch.keeps(unit):
                        outcome = server.spool(outcome)
                with self.lock:
                    self.progress.finished(outcome)
                batch.done(unit, outcome)
                ended, unit = ((batch, unit) if outcome.kept is not None else None), None
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
