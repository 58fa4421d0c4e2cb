"""Decoding many tasks at once: worker processes bounded by the CPUs and the free memory.

run-iket decodes one process after another, one format after another, on one core. Here
the tasks run in parallel, each small one in this process and each large one in a worker
process of its own (``python -m iket_cli.decode.worker``), so a decoder that crashes on a
corrupt capture fails that task alone. The JSON export of a process with several launches
is split: each launch is exported by a worker of its own, side by side with every other
task, and each part is merged (:mod:`.splitjson`) in launch order as soon as it and those
before it are done. ``jobs`` bounds the decodes running at once, parts and merges included.
The merge tells the manifest its counts, and with ``html`` the workers' scanned columns make
the report's trace (:mod:`.partcols`): the merged file is never read back. keep256's JSON
(2 launches, 2-core machine): 0.55x of run-iket's export; ITERS=512 on the H200 (3 launches,
907 MB): ``--postprocess all`` 0.28x to 0.33x, ``json`` 0.46x to 0.62x (docs/benchmarks.md). An
interrupt kills the workers, removes their half-written files and raises
:class:`~iket_cli.errors.CaptureInterrupted`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..capture import spawn
from ..capture.runner import Cancelled, sigterm_as_exception, wait_all
from ..errors import CaptureInterrupted, Terminated, signal_of
from ..model import artifacts, memo
from . import export, partcols, splitjson
from .tasks import DISK_FULL, Outcome, Task, columns_name, indices_name, missing_input, part_leftovers

#: Below this many raw bytes a capture is decoded in-process: spawning costs more than it saves.
INLINE_BYTES = 4 << 20


class Progress:
    """What :func:`run` reports while it decodes. The default says nothing."""

    def planned(self, units: list[Task]) -> None:
        """The decodes about to run: whole tasks, and the launches of split JSON exports."""

    def started(self, task: Task) -> None:
        """A task began."""

    def finished(self, outcome: Outcome) -> None:
        """A task ended, well or not."""


def default_jobs(tasks: list[Task], requested: int | None = None) -> int:
    """Workers to use: requested or the CPUs, no more than tasks, and what memory allows."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    jobs = max(1, min(requested or cpus or 1, len(tasks) or 1))
    biggest = max((t.memory for t in tasks), default=0)
    available = _mem_available()
    if biggest and available:
        jobs = max(1, min(jobs, available // biggest))
    return jobs


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run(
    tasks: list[Task],
    *,
    jobs: int | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> list[Outcome]:
    """Run every task; never raises for a task's failure (see ``Outcome.error``).

    Ctrl-C, SIGTERM or ``cancel`` (set from another thread) kill the workers, remove their
    half-written files and raise :class:`~iket_cli.errors.CaptureInterrupted`; the tasks
    stopped that way are reported to ``progress`` as cancelled, not as failed.
    """
    with start(tasks, jobs=jobs, progress=progress, cancel=cancel) as decoding:
        return decoding.wait()


def start(
    tasks: list[Task],
    *,
    jobs: int | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> Decoding:
    """Start every task now and return at once: the caller can do its own work (import what
    it needs after the decode, say) while the workers run, then :meth:`Decoding.wait`.

    Use it as a context manager: an interrupt anywhere inside (in the caller's own work
    too) stops the workers as :func:`run` does.
    """
    return Decoding(tasks, jobs, progress or Progress(), cancel)


class Decoding:
    """Tasks running in their threads and worker processes (see :func:`start`)."""

    def __init__(
        self, tasks: list[Task], jobs: int | None, progress: Progress, cancel: threading.Event | None
    ) -> None:
        self.tasks, self.progress, self.cancel = tasks, progress, cancel
        self.workers = _Workers()
        self.lock = threading.Lock()
        units = [unit for task in tasks for unit in _units(task)]
        progress.planned(units)
        #: One per decode running at once (a whole task, a part or a merge).
        self.slots = threading.Semaphore(default_jobs(units, jobs))
        self.pool = ThreadPoolExecutor(max_workers=max(1, len(tasks)))
        self.part_pool = ThreadPoolExecutor(max_workers=max(1, len(units)))
        self.futures = [self.pool.submit(self._one, task) for task in tasks]

    def _one(self, task: Task) -> Outcome:
        if self.workers.cancelled:
            return Outcome(task, 0.0, cancelled=True)
        with self.lock:
            self.progress.started(task)
        missing = missing_input(task)  # the decoder aborts its process on a truncated file
        if missing:
            outcome = Outcome(task, 0.0, error=missing)
        elif task.raw_bytes <= INLINE_BYTES and export.available():
            with self.slots:
                outcome = export.decode(task)
        elif _split(task) and (parts := splitjson.part_manifests(task.raw)):
            outcome = self._by_launches(task, task.parts(len(parts)))
        else:
            with self.slots:
                outcome = self.workers.decode(task)
        with self.lock:
            self.progress.finished(outcome)
        return outcome

    def _part(self, part: Task) -> Outcome:
        with self.slots:
            if self.workers.cancelled:
                return Outcome(part, 0.0, cancelled=True)
            with self.lock:
                self.progress.started(part)
            outcome = self.workers.decode(part)
        with self.lock:
            self.progress.finished(outcome)
        return outcome

    def _by_launches(self, task: Task, parts: list[Task]) -> Outcome:
        """Each launch in a worker of its own, within the slots; each merged in launch order
        as soon as it and the ones before it are done (the last merge ends the task)."""
        start = time.monotonic()
        out = task.out_dir / task.outputs()[0]
        tmp = export.temporary(out)
        futures = [self.part_pool.submit(self._part, part) for part in parts]
        columns: list = []  # each part's launch, as its worker scanned it (html only)
        try:
            with splitjson.Merger(tmp) as merger:
                for future in futures:
                    done = future.result()
                    if done.cancelled or done.error:
                        for other in futures:
                            other.cancel()
                        return self._part_failed(task, done, start, [f for f in futures if not f.cancelled()])
                    spooled = done.task.out_dir / done.task.outputs()[0]
                    with self.slots:
                        merger.add(spooled)
                        columns.append(_columns(spooled))
                    _remove_spool(done.task)
                with self.slots:
                    merger.finish()
            os.replace(tmp, out)
            if merger.counts is not None:
                artifacts.remember_counts(out, merger.counts)  # the manifest's counts, not a rescan
            if columns and None not in columns:  # the report's trace, not a read of the file
                memo.hold(out, partcols.assemble(out, columns, merger.maps, merger.strings, merger.locations))
        except OSError as error:
            message = f"{error.strerror or error} writing {error.filename or out}"
            return Outcome(task, time.monotonic() - start, error=message, errno=error.errno)
        except ValueError as error:  # a part the merge cannot read (not the decoder's layout)
            return Outcome(task, time.monotonic() - start, error=f"{task.raw}: merging its launches: {error}")
        finally:
            tmp.unlink(missing_ok=True)
            for part in parts:
                part.raw.unlink(missing_ok=True)
                _remove_spool(part)
        return Outcome(task, time.monotonic() - start, written=[out.name])

    @staticmethod
    def _part_failed(task: Task, done: Outcome, start: float, running: list) -> Outcome:
        """The task's outcome when one launch failed or was cancelled (the others end first)."""
        for future in running:
            future.result()
        seconds = time.monotonic() - start
        if done.cancelled:
            return Outcome(task, seconds, cancelled=True)
        why = done.error.removeprefix(f"{done.task.raw}: ")  # named by the raw capture and launch
        return Outcome(task, seconds, error=f"{task.raw}:{done.task.which_launch}: {why}", errno=done.errno)

    def wait(self) -> list[Outcome]:
        """Every task's outcome, once all have ended."""
        wait_all(self.futures, self.cancel)
        return [future.result() for future in self.futures]

    def __enter__(self) -> Decoding:
        self._signals = sigterm_as_exception()
        self._signals.__enter__()
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if isinstance(error, (KeyboardInterrupt, Terminated, Cancelled)):
                self.workers.cancel()
                self.part_pool.shutdown(wait=True, cancel_futures=True)
                self.pool.shutdown(wait=True, cancel_futures=True)
                _remove_partials(self.tasks)
                raise CaptureInterrupted.by(
                    signal_of(error), " while decoding", phase="postprocess"
                ) from None
            if error is not None:  # a bug in the caller's own work: stop the workers all the same
                self.workers.cancel()
        finally:
            self.pool.shutdown(wait=True)
            self.part_pool.shutdown(wait=True)
            self._signals.__exit__(None, None, None)


def _split(task: Task) -> bool:
    """Whether ``task`` is a JSON export that could be split by launches."""
    return task.export == "json" and task.part is None


def _units(task: Task) -> list[Task]:
    """What ``task`` runs as: its launches, for a JSON export split by them; else itself."""
    if task.raw_bytes <= INLINE_BYTES or not _split(task):
        return [task]
    count = splitjson.decodable_launches(task.raw)
    return task.parts(count) if count > 1 else [task]


class _Workers:
    """The worker processes of one :func:`run`, so that an interrupt stops exactly them."""

    def __init__(self) -> None:
        self.cancelled = False
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()

    def cancel(self) -> None:
        """Kill every running worker; what they were doing is reported as cancelled."""
        with self._lock:
            self.cancelled = True
            for proc in self._running:
                proc.kill()

    def decode(self, task: Task) -> Outcome:
        """One task in a worker process of its own (in its own session: a Ctrl-C at the
        terminal reaches the CLI, which stops the workers; the worker dies with the CLI)."""
        start = time.monotonic()
        spec = json.dumps({**task.to_dict(), "parent": os.getpid()})
        with self._lock:
            if self.cancelled:
                return Outcome(task, 0.0, cancelled=True)
            proc = spawn.start(
                [sys.executable, "-m", "iket_cli.decode.worker", spec],
                stdout=spawn.DEVNULL,
                stderr=spawn.PIPE,
                text=True,
                new_session=True,
            )
            self._running.add(proc)
        try:
            with proc:
                _, stderr = proc.communicate()
        finally:
            with self._lock:
                self._running.discard(proc)
        seconds = time.monotonic() - start
        if self.cancelled:
            return Outcome(task, seconds, cancelled=True)
        if proc.returncode == 0:
            return Outcome(task, seconds, written=task.outputs())
        last = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        if proc.returncode < 0:
            last = f"the decoder crashed (signal {-proc.returncode})"
        code = proc.returncode if proc.returncode in DISK_FULL else None
        return Outcome(task, seconds, error=f"{task.raw}: {last}", errno=code)


def _columns(spooled):
    """The launch a part's worker scanned and kept beside its spool, or None."""
    kept = spooled.with_name(columns_name(spooled.name))
    return partcols.read(kept) if kept.is_file() else None


def _remove_spool(part: Task) -> None:
    """A merged (or abandoned) part's spool and what was kept beside it."""
    spooled = part.out_dir / part.outputs()[0]
    for name in (spooled.name, indices_name(spooled.name), columns_name(spooled.name)):
        spooled.with_name(name).unlink(missing_ok=True)


def _remove_partials(tasks: list[Task]) -> None:
    """Temporary files of killed workers: half-written artifacts and launch parts."""
    for task in tasks:
        for path in partials(task):
            path.unlink(missing_ok=True)


def partials(task: Task) -> list:
    """The temporary files a task writes before it renames its artifacts into place."""
    leftovers = [export.temporary(task.out_dir / name) for name in task.outputs()]
    return leftovers + part_leftovers(task.raw)
