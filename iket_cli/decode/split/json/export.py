"""A process's JSON export, by launches and CTA chunks, in the pool's workers, merged in order.

Each launch, or each chunk of a big launch's CTAs (:mod:`..chunks`), is exported by the
decode's long-lived workers (:class:`...schedule.Serving`) side by side with every other
task. A launch's chunks are stitched (:mod:`.stitch`: read and planned here, their bytes written by the
same workers, :mod:`.stitch_jobs`) and each launch is merged (:mod:`.merge`) in
launch order as soon as it and those before it are done. Reading a launch's chunks (their
tables, indices and layout) and joining their columns for the report are this process's own
work, a few tenths of a second a big launch: a reader thread (:class:`_Reader`) does them
one launch ahead, while the launch before is written, so that after the last chunk only
that launch's write is left (docs/history/benchmarks.md, "The stitch read"). A launch whose chunks do
not stitch is exported whole; a part whose worker fails fails this export alone, named by its
launch, and nothing it wrote is left.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...schedule import Batch, Writers
from ...tasks import Joined, Outcome, Task, columns_name, indices_name
from ..base import failed, part_failed
from ..launches import LaunchPart
from . import columns, stitch
from .merge import Merger

if TYPE_CHECKING:
    from ..base import Run


def by_launches(run: Run, task: Task, launches: list[LaunchPart]) -> Outcome:
    """Export ``task`` (a JSON export) by its ``launches`` and merge them into its file; with
    ``html``, the outcome carries the trace assembled from the workers' columns."""
    from ... import decoder

    start = time.monotonic()
    out = task.out_dir / task.outputs()[0]
    tmp = decoder.temporary(out)
    parts = task.parts(len(launches))
    units = task.units([len(launch.chunks) or 1 for launch in launches])
    batch = Batch([unit for group in units for unit in group])
    writers = Writers(batch, run.hand_out(task, batch))
    reader = _Reader(run, list(zip(parts, launches, units, strict=True)), batch, columns.wanted(task.formats))
    scanned: list = []  # each launch, as its workers scanned it (html only)
    try:
        with Merger(tmp) as merger:
            for part in parts:
                ready = reader.next()
                if ready.failed is not None:
                    return part_failed(task, ready.failed, start, batch)
                _write(run, merger, ready, writers)
                scanned.append(_columns(ready.spooled))
                _remove_spool(part)
            with run.slots(urgent=True):
                merger.finish()
        os.replace(tmp, out)
        assembled = None
        if scanned and None not in scanned:  # the report's trace, not a read of the file
            assembled = columns.assemble(out, scanned, merger.maps, merger.strings, merger.locations)
    except (OSError, ValueError) as error:  # ValueError: a part the merge cannot read
        return failed(run, task, start, error, out, "merging its launches")
    finally:
        batch.drained()  # no worker still writing a part's files when they are removed
        reader.close()
        tmp.unlink(missing_ok=True)
        for unit in [*parts, *batch.futures]:
            unit.raw.unlink(missing_ok=True)
            _remove_spool(unit)
    seconds = time.monotonic() - start
    return Outcome(task, seconds, written=[out.name], split=Joined(merger.counts, assembled))


@dataclass
class _Ready:
    """One launch, read and ready to write: its spool (exported whole) or its chunks' stitch;
    or the outcome of the part that failed."""

    spooled: Path
    stitched: stitch.Stitch | None = None
    failed: Outcome | None = None
    #: The join of its chunks' columns, running beside its write (None: nothing to join).
    columns: Future | None = None
    chunks: list[Path] = field(default_factory=list)


class _Reader:
    """Reads the launches in order in a thread of its own, at most one launch ahead of the
    one being written (a read launch holds its chunks' indices in memory)."""

    def __init__(self, run: Run, launches: list, batch: Batch, join_columns: bool) -> None:
        self.run, self.batch, self.join_columns = run, batch, join_columns
        self.ready: list[Future] = [Future() for _ in launches]
        self.taken = 0
        self.room = threading.Semaphore(2)  # the launch being written and the next
        self.stopped = False
        self.thread = threading.Thread(target=self._read_all, args=(launches,), name="reader", daemon=True)
        self.thread.start()

    def next(self) -> _Ready:
        """The next launch, once read (the reader's error raised here)."""
        if self.taken:
            self.room.release()  # the launch before is written
        self.taken += 1
        return self.ready[self.taken - 1].result()

    def _read_all(self, launches: list) -> None:
        for number, (part, launch, group) in enumerate(launches):
            self.room.acquire()
            if self.stopped:
                break
            try:
                ready = self._read(part, launch, group)
            except BaseException as error:  # the writer raises it
                self.ready[number].set_exception(error)
                break
            if ready.stitched is not None and self.join_columns:
                ready.columns = Future()
            self.ready[number].set_result(ready)
            if ready.failed is not None:
                break
            if ready.columns is not None:
                with self.run.slots(urgent=True):
                    _join_columns(ready.chunks, ready.stitched.maps, launch.ctas, ready.spooled)
                ready.columns.set_result(None)

    def _read(self, part: Task, launch: LaunchPart, group: list[Task]) -> _Ready:
        """One launch once its parts are exported: its spool, or its chunks read for the
        stitch; the launch exported whole where they do not stitch."""
        spooled = part.out_dir / part.outputs()[0]
        outcomes = [self.batch.futures[unit].result() for unit in group]
        failed = next((done for done in outcomes if done.cancelled or done.error), None)
        if failed is not None:
            return _Ready(spooled, failed=failed)
        if not launch.chunks:
            return _Ready(spooled)
        spools = [done.task.out_dir / done.task.outputs()[0] for done in outcomes]
        try:
            with self.run.slots(urgent=True):
                return _Ready(spooled, stitch.Stitch(spools, launch.firsts, launch.ctas), chunks=spools)
        except ValueError:  # not the layout the stitch relies on: the launch exported whole
            done = self.run.whole(part)
            return _Ready(spooled, failed=done if done.error or done.cancelled else None)

    def close(self) -> None:
        """Stop reading (the batch is drained: no part is still awaited) and let go of every
        launch read and not written."""
        self.stopped = True
        self.room.release()
        self.thread.join()
        for future in self.ready:
            if future.done() and future.exception() is None and future.result().stitched is not None:
                future.result().stitched.close()


def _write(run: Run, merger: Merger, ready: _Ready, writers: Writers) -> None:
    """Merge one launch: its spool, or its chunks stitched (into a spool of its own for the
    first launch, which becomes the output; straight into the output for a later one) by
    the workers side by side (``writers``). Only what runs here takes a slot: the workers
    take their own."""
    if ready.stitched is None:
        with run.slots(urgent=True):
            merger.add(ready.spooled)
        return
    with ready.stitched as stitched:  # from here on only a write can fail (OSError)
        if merger.handle is None:
            merger.add(ready.spooled, stitched.write_file(ready.spooled, writers, writers.parts))
        else:
            merger.write_launch(
                stitched.tables,
                lambda handle, names, locs: stitched.write_into(handle, names, locs, writers, writers.parts),
            )
    if ready.columns is not None:
        ready.columns.result()
    for spool in ready.chunks:
        _remove_spooled(spool)


def _columns(spooled: Path):
    """The launch a part's worker scanned and kept beside its spool, or None."""
    kept = spooled.with_name(columns_name(spooled.name))
    return columns.read(kept) if kept.is_file() else None


def _join_columns(spools: list[Path], maps: list, ctas: int, spooled: Path) -> None:
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
    _remove_spooled(part.out_dir / part.outputs()[0])


def _remove_spooled(spooled: Path) -> None:
    for name in (spooled.name, indices_name(spooled.name), columns_name(spooled.name)):
        spooled.with_name(name).unlink(missing_ok=True)
