"""Decoding many tasks at once: worker processes bounded by the CPUs and the free memory.

run-iket decodes one process after another, one format after another, on one core. Here the
tasks run in parallel, each small one in a fork of this process and each large one in a worker
process of its own (:mod:`.workers`), so a decoder that crashes on a corrupt capture fails that
task alone, never the CLI. The Perfetto export of a big process is split and joined by
:mod:`.pftrace_split`. The JSON export of a process with several launches, or with a big
one, is split: each launch, or each chunk of a big launch's CTAs (:mod:`.split.chunks`), is
exported by the decode's long-lived workers (:mod:`.serving`: one set for every split export),
side by side with every other task; a launch's
chunks are stitched (:mod:`.split.stitch`: read and planned here, its bytes written by the same
workers, :mod:`.split.stitch_jobs`) and each launch merged (:mod:`.split.join`) in launch order
as soon as it and those before it are done. ``jobs`` bounds the decodes running at once, chunks,
stitch jobs and merges included, and a stitch or a merge goes before the next chunk
(:mod:`.split.plan`). The merge's outcome carries its record counts for the manifest, and with
``html`` the trace made of the workers' scanned columns for the report (:mod:`.split.columns`):
the merged file is never read back (the figures against run-iket's export: docs/benchmarks.md,
issue 22). An interrupt kills the workers, removes their half-written files and raises
:class:`~iket_cli.errors.CaptureInterrupted`.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..errors import CaptureInterrupted, Terminated, signal_of
from ..model.vocab import JSON_EXPORT
from ..system import signals
from ..system.runner import Cancelled, wait_all
from . import decoder, pftrace_split
from .serving import Serving
from .split import chunks, columns, join, stitch
from .split.plan import Batch, Slots, Writers
from .tasks import (
    Outcome,
    Progress,
    Task,
    columns_name,
    drop_traces,
    indices_name,
    missing_input,
    part_leftovers,
)
from .workers import Workers

#: Up to this many raw bytes a capture is decoded in a fork of the CLI (the decoder already
#: imported there), above in a worker of its own: a fresh interpreter costs more than it saves.
INLINE_BYTES = 4 << 20


def _cpus() -> int:
    return (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()) or 1


def default_jobs(tasks: list[Task], requested: int | None = None) -> int:
    """Workers to use: requested or the CPUs, no more than tasks, and what memory allows."""
    jobs = max(1, min(requested or _cpus(), len(tasks) or 1))
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
        self.workers = Workers()
        self.lock = threading.Lock()
        self.done: list[Outcome] = []  # the tasks' outcomes, as they finish (see _hold)
        self.cpus = jobs or _cpus()
        units = [unit for task in tasks for unit in _units(task, self.cpus)]
        progress.planned(units)
        self.jobs = default_jobs(units, jobs)
        #: One per decode running at once (a whole task, a part, a chunk, a stitch or a merge).
        self.slots = Slots(self.jobs)
        self.pool = ThreadPoolExecutor(max_workers=max(1, len(tasks)))
        #: The long-lived workers every split export's units and jobs are handed out to.
        self.serving = Serving(self.workers, self.slots, self.progress, self.lock, self.jobs)
        self.futures = [self.pool.submit(self._one, task) for task in tasks]

    def _one(self, task: Task) -> Outcome:
        if self.workers.cancelled:
            return Outcome(task, 0.0, cancelled=True)
        with self.lock:
            self.progress.started(task)
        missing = missing_input(task)  # the decoder aborts its process on a truncated file
        if missing:
            outcome = Outcome(task, 0.0, error=missing)
        elif task.raw_bytes <= INLINE_BYTES and decoder.available():
            with self.slots():
                outcome = self.workers.forked(task)
        elif _split(task) and (launches := _parts(task, self.cpus)):
            if task.export == JSON_EXPORT:
                outcome = self._by_launches(task, launches)
            else:
                outcome = pftrace_split.by_launches(self, task, launches)
        else:
            with self.slots():
                outcome = self.workers.decode(task)
        with self.lock:
            self.progress.finished(outcome)
            self._hold(outcome)
        return outcome

    def _hold(self, outcome: Outcome) -> None:
        """Keep the assembled traces of the last tasks only (:func:`.tasks.drop_traces`)."""
        self.done.append(outcome)
        drop_traces(self.done)

    def _by_launches(self, task: Task, launches: list[join.LaunchPart]) -> Outcome:
        """Each launch (or each chunk of its CTAs) in a long-lived worker, within the slots;
        each launch merged in order as soon as it and the ones before it are done (the last
        merge ends the task)."""
        start = time.monotonic()
        out = task.out_dir / task.outputs()[0]
        tmp = decoder.temporary(out)
        parts = task.parts(len(launches))
        units = task.units([len(launch.chunks) or 1 for launch in launches])
        batch = Batch([unit for group in units for unit in group])
        writers = Writers(batch, self.serving.hand_out(batch))
        scanned: list = []  # each launch, as its workers scanned it (html only)
        try:
            with join.Merger(tmp) as merger:
                for part, launch, group in zip(parts, launches, units, strict=True):
                    outcomes = [batch.futures[unit].result() for unit in group]
                    failed = next((done for done in outcomes if done.cancelled or done.error), None)
                    if failed is None:
                        spooled = self._merge(merger, part, launch, outcomes, writers)
                        failed = spooled if isinstance(spooled, Outcome) else None  # its whole decode
                    if failed is not None:
                        return self.part_failed(task, failed, start, batch)
                    scanned.append(_columns(spooled))
                    _remove_spool(part)
                with self.slots(urgent=True):
                    merger.finish()
            os.replace(tmp, out)
            assembled = None
            if scanned and None not in scanned:  # the report's trace, not a read of the file
                assembled = columns.assemble(out, scanned, merger.maps, merger.strings, merger.locations)
        except OSError as error:
            message = f"{error.strerror or error} writing {error.filename or out}"
            return Outcome(task, time.monotonic() - start, error=message, errno=error.errno)
        except ValueError as error:  # a part the merge cannot read (not the decoder's layout)
            if self.workers.cancelled:  # a worker writing the launch was stopped
                return Outcome(task, time.monotonic() - start, cancelled=True)
            return Outcome(task, time.monotonic() - start, error=f"{task.raw}: merging its launches: {error}")
        finally:
            batch.drained()  # no worker still writing a part's files when they are removed
            tmp.unlink(missing_ok=True)
            for unit in [*parts, *batch.futures]:
                unit.raw.unlink(missing_ok=True)
                _remove_spool(unit)
        seconds = time.monotonic() - start
        return Outcome(task, seconds, written=[out.name], counts=merger.counts, trace=assembled)

    def _merge(
        self,
        merger: join.Merger,
        part: Task,
        launch: join.LaunchPart,
        outcomes: list,
        run: Writers,
    ):
        """Merge one decoded launch: its spool, or its chunks stitched (into a spool of its
        own for the first launch, which becomes the output; straight into the output for a
        later one) by the batch's workers side by side (``run``); the launch decoded whole
        if they do not stitch. Returns the path its columns are kept beside, or the Outcome
        of its whole decode when that failed. Only what runs here takes a slot: the
        workers take their own."""
        spooled = part.out_dir / part.outputs()[0]
        if not launch.chunks:
            with self.slots(urgent=True):
                merger.add(spooled)
            return spooled
        spools = [done.task.out_dir / done.task.outputs()[0] for done in outcomes]
        try:
            try:
                with self.slots(urgent=True):
                    stitched = stitch.Stitch(spools, launch.firsts, launch.ctas)
            except ValueError:  # not the layout the stitch relies on: the launch decoded whole
                with self.slots(urgent=True):
                    done = self.workers.decode(part)
                if done.error or done.cancelled:
                    return done
                with self.slots(urgent=True):
                    merger.add(spooled)
                return spooled
            with stitched:  # from here on only a write can fail (OSError)
                if merger.handle is None:
                    merger.add(spooled, stitched.write_file(spooled, run, run.parts))
                else:
                    merger.write_launch(
                        stitched.tables,
                        lambda handle, names, locs: stitched.write_into(handle, names, locs, run, run.parts),
                    )
                with self.slots(urgent=True):
                    _join_columns(spools, stitched.maps, launch.ctas, spooled)
        finally:
            for done in outcomes:
                _remove_spool(done.task)
        return spooled

    @staticmethod
    def part_failed(task: Task, done: Outcome, start: float, batch: Batch) -> Outcome:
        """The task's outcome when one launch failed or was cancelled (the batch's other
        units and jobs end first)."""
        batch.drained()
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


def _parts(task: Task, cpus: int) -> list[join.LaunchPart] | None:
    """The launches (and chunks) ``task`` is split into, their manifests written; or None."""
    return join.part_manifests(task.raw, _chunk_bytes(task, cpus), task.export)


def _chunk_bytes(task: Task, cpus: int) -> int:
    if task.export == JSON_EXPORT:
        return chunks.CHUNK_RAW_BYTES
    return chunks.perfetto_chunk_bytes(task.raw_bytes, cpus)


def _units(task: Task, cpus: int) -> list[Task]:
    """What ``task`` runs as: its launches (or chunks), for an export split by them; else itself."""
    if task.raw_bytes <= INLINE_BYTES or not _split(task):
        return [task]
    counts = join.planned_parts(task.raw, _chunk_bytes(task, cpus))
    return [unit for group in task.units(counts) for unit in group] or [task]


def _columns(spooled):
    """The launch a part's worker scanned and kept beside its spool, or None."""
    kept = spooled.with_name(columns_name(spooled.name))
    return columns.read(kept) if kept.is_file() else None


def _join_columns(spools: list, maps: list, ctas: int, spooled) -> None:
    """The stitched launch's columns from its chunks' (html only; where they do not join,
    none: the report then reads the merged file)."""
    kept = [spool.with_name(columns_name(spool.name)) for spool in spools]
    joined = spooled.with_name(columns_name(spooled.name))
    if all(path.is_file() for path in kept):
        try:
            columns.join(kept, maps, ctas, joined)
        except ValueError:
            joined.unlink(missing_ok=True)


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
    leftovers = [decoder.temporary(task.out_dir / name) for name in task.outputs()]
    return leftovers + part_leftovers(task.raw)
