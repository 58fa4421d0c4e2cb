"""Decoding many tasks at once: worker processes bounded by the CPUs and the free memory.

run-iket decodes one process after another, one format after another, on one core. Here the
tasks run in parallel, each small one in a fork of this process and each large one in a worker
process of its own (:mod:`.workers`), so a decoder that crashes on a corrupt capture fails that
task alone, never the CLI. A big process's JSON and Perfetto exports are split by launches
and CTA chunks by the wings of :mod:`.split` (the pool is their :class:`.split.base.Run`),
their units and jobs run by the decode's long-lived workers (:class:`.schedule.Serving`: one
set for every split export, started here or ahead, :mod:`.prestart`), the JSON export's
handed out first. Each raw manifest is read once, into its launch plan
(:func:`.split.launches.plan`). ``jobs`` bounds the decodes running at once, chunks, stitch
jobs and merges included, and a stitch or a merge goes before the next chunk
(:mod:`.schedule`). A JSON export's trace,
assembled from its workers' columns for the report, is handed to whoever listens
(:meth:`Decoding.listen`) as soon as it is merged. An interrupt kills the workers, removes
their half-written files and raises :class:`~iket_cli.errors.CaptureInterrupted`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..errors import CaptureInterrupted, Terminated, signal_of
from ..model.vocab import JSON_EXPORT
from ..system import signals
from ..system.runner import Cancelled, wait_all
from . import decoder, prestart, split
from .prestart import INLINE_BYTES, Prestarted
from .schedule import Batch, Serving, Slots
from .split import chunks, launches
from .tasks import (
    Outcome,
    Progress,
    Task,
    drop_traces,
    held_traces,
    missing_input,
    part_leftovers,
)
from .workers import Workers

if TYPE_CHECKING:
    from ..model.trace import Trace


def default_jobs(tasks: list[Task], requested: int | None = None) -> int:
    """Workers to use: requested or the CPUs, no more than tasks, and what memory allows."""
    jobs = max(1, min(requested or prestart.cpus(), len(tasks) or 1))
    biggest = max((t.memory for t in tasks), default=0)
    available = prestart.mem_available()
    if biggest and available:
        jobs = max(1, min(jobs, available // biggest))
    return jobs


def run(
    tasks: list[Task],
    *,
    jobs: int | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    prestarted: Prestarted | None = None,
) -> list[Outcome]:
    """Run every task; never raises for a task's failure (see ``Outcome.error``).

    Ctrl-C, SIGTERM or ``cancel`` (set from another thread) kill the workers, remove their
    half-written files and raise :class:`~iket_cli.errors.CaptureInterrupted`; the tasks
    stopped that way are reported to ``progress`` as cancelled, not as failed. ``prestarted``:
    workers started ahead (:mod:`.prestart`), taken before any is started; the caller
    closes it.
    """
    with start(tasks, jobs=jobs, progress=progress, cancel=cancel, prestarted=prestarted) as decoding:
        return decoding.wait()


def start(
    tasks: list[Task],
    *,
    jobs: int | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    prestarted: Prestarted | None = None,
) -> Decoding:
    """Start every task now and return at once: the caller can do its own work (import what
    it needs after the decode, say) while the workers run, then :meth:`Decoding.wait`.

    Use it as a context manager: an interrupt anywhere inside (in the caller's own work
    too) stops the workers as :func:`run` does.
    """
    return Decoding(tasks, jobs, progress or Progress(), cancel, prestarted)


class Decoding:
    """Tasks running in their threads and worker processes (see :func:`start`)."""

    def __init__(
        self,
        tasks: list[Task],
        jobs: int | None,
        progress: Progress,
        cancel: threading.Event | None,
        prestarted: Prestarted | None = None,
    ) -> None:
        self.tasks, self.progress, self.cancel = tasks, progress, cancel
        self.workers = Workers(prestarted)
        self.lock = threading.Lock()
        self.done: list[Outcome] = []  # the tasks' outcomes, as they finish (see _hold)
        self.cpus = jobs or prestart.cpus()
        #: Each task's launch plan: its raw manifest read once (:func:`.split.launches.plan`).
        self.plans = {task: launches.plan(task.raw, _chunk_bytes(task, self.cpus)) for task in tasks}
        units = [unit for task in tasks for unit in _units(task, self.plans[task])]
        progress.planned(units)
        self.jobs = default_jobs(units, jobs)
        #: One per decode running at once (a whole task, a part, a chunk, a stitch or a merge).
        self.slots = Slots(self.jobs)
        self.pool = ThreadPoolExecutor(max_workers=max(1, len(tasks)))
        #: The long-lived workers every split export's units and jobs are handed out to.
        self.serving = Serving(self.workers, self.slots, self.progress, self.lock, self.jobs)
        #: The JSON exports that may be split, until their units are handed out (:meth:`hand_out`).
        self._json_ahead = {task for task in tasks if task.export == JSON_EXPORT and _split(task)}
        self._handed = threading.Condition()
        self._listener: Callable[[str, Trace], None] | None = None
        self.futures = [self.pool.submit(self._one, task) for task in tasks]

    @property
    def cancelled(self) -> bool:
        """Whether the decode is being stopped (an interrupt, :class:`.split.base.Run`)."""
        return self.workers.cancelled

    def whole(self, part: Task) -> Outcome:
        """Decode ``part`` whole in a worker, in an urgent slot (:class:`.split.base.Run`)."""
        with self.slots(urgent=True):
            return self.workers.decode(part)

    def listen(self, assembled: Callable[[str, Trace], None]) -> None:
        """Call ``assembled(file name, trace)`` for each trace a JSON export assembles (for
        the report), at once for those already assembled, in the thread that assembled it."""
        with self.lock:
            self._listener = assembled
            ready = held_traces(self.done)
        for name, trace in ready:
            assembled(name, trace)

    def hand_out(self, task: Task, batch: Batch) -> int:
        """Give the ``batch`` of a split export to the workers (:meth:`.schedule.Serving.hand_out`),
        the JSON exports' first: a JSON launch ends in a stitch and a merge and the report
        waits for them, a longer tail than a Perfetto part's move, which the Perfetto parts
        then run beside (on 16 CPUs the Perfetto parts, planned sooner, took the workers first
        and the JSON export ended a round of units later)."""
        if task.export != JSON_EXPORT:
            with self._handed:
                while self._json_ahead and not self.workers.cancelled:
                    self._handed.wait(0.1)
        try:
            return self.serving.hand_out(batch)
        finally:
            self._handed_out(task)

    def _handed_out(self, task: Task) -> None:
        with self._handed:
            self._json_ahead.discard(task)
            self._handed.notify_all()

    def _one(self, task: Task) -> Outcome:
        try:
            return self._decoded(task)
        finally:
            self._handed_out(task)  # a JSON export not split, or failed: nothing to wait for

    def _decoded(self, task: Task) -> Outcome:
        if self.workers.cancelled:
            return Outcome(task, 0.0, cancelled=True)
        with self.lock:
            self.progress.started(task)
        plan = self.plans[task]
        missing = missing_input(task, plan.data)  # the decoder aborts its process on a truncated file
        if missing:
            outcome = Outcome(task, 0.0, error=missing)
        elif task.raw_bytes <= INLINE_BYTES and decoder.available():
            decoder.preload()  # before the fork, so the fork has it imported (a no-op once done)
            with self.slots():
                outcome = self.workers.forked(task)
        elif _split(task) and (parts := plan.write(task.export)):
            outcome = split.wing(task.export).by_launches(self, task, parts)
        else:
            with self.slots():
                outcome = self.workers.decode(task)
        with self.lock:
            self.progress.finished(outcome)
            self._hold(outcome)
            listener = self._listener
        if listener is not None:
            for name, trace in held_traces([outcome]):
                listener(name, trace)
        return outcome

    def _hold(self, outcome: Outcome) -> None:
        """Keep the assembled traces of the last tasks only (:func:`.tasks.drop_traces`)."""
        self.done.append(outcome)
        drop_traces(self.done)

    def wait(self) -> list[Outcome]:
        """Every task's outcome, once all have ended."""
        wait_all(self.futures, self.cancel)
        return [future.result() for future in self.futures]

    def __enter__(self) -> Decoding:
        self._signals = signals.as_exception()
        self._signals.__enter__()
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if isinstance(error, (KeyboardInterrupt, Terminated, Cancelled)):
                self.workers.cancel()
                self.serving.close(cancel=True)
                self.pool.shutdown(wait=True, cancel_futures=True)
                _remove_partials(self.tasks)
                raise CaptureInterrupted.by(
                    signal_of(error), " while decoding", phase="postprocess"
                ) from None
            if error is not None:  # a bug in the caller's own work: stop the workers all the same
                self.workers.cancel()
        finally:
            self.pool.shutdown(wait=True)
            self.serving.close()
            self._signals.__exit__(None, None, None)


def _split(task: Task) -> bool:
    """Whether ``task`` is a whole export that could be split by launches."""
    return task.part is None


def _chunk_bytes(task: Task, cpus: int) -> int:
    return chunks.chunk_bytes(task.export, task.raw_bytes, cpus)


def _units(task: Task, plan: launches.Plan) -> list[Task]:
    """What ``task`` runs as: its launches (or chunks), for an export split by them; else itself."""
    if task.raw_bytes <= INLINE_BYTES or not _split(task):
        return [task]
    return [unit for group in task.units(list(plan.chunks)) for unit in group] or [task]


def _remove_partials(tasks: list[Task]) -> None:
    """Temporary files of killed workers: half-written artifacts and launch parts."""
    for task in tasks:
        for path in partials(task):
            path.unlink(missing_ok=True)


def partials(task: Task) -> list:
    """The temporary files a task writes before it renames its artifacts into place."""
    leftovers = [decoder.temporary(task.out_dir / name) for name in task.outputs()]
    return leftovers + part_leftovers(task.raw)
