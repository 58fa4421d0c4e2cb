"""Decoding a capture folder: the one entry point of ``iket profile`` (each capture folder,
repeat 1's, then each repeat's, its progress in the log) and ``iket postprocess``. One plan,
the worker pool, the lint's and report's work begun beside it (:class:`.finish.Ahead`), one
wording of a decode that failed (:func:`decode_error`) and one of a full disk."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..capture.two_pass.passes import Transcript
from ..decode import pool, prestart
from ..decode import tasks as decode_tasks
from ..decode.tasks import Outcome
from ..errors import DecodeError
from ..system.filesystem import DISK_FULL, disk_full

if TYPE_CHECKING:
    from ..model.trace import Trace
    from .finish import Ahead


class _LoggedProgress(pool.Progress):
    """Decode progress as ``[iket]`` lines: in the log, and on the console with -v."""

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript

    def finished(self, outcome: Outcome) -> None:
        task = outcome.task
        verdict = f"failed: {outcome.error}" if outcome.error else f"in {outcome.seconds:.2f} s"
        verdict = "cancelled" if outcome.cancelled else verdict
        self.transcript.line(f"[iket] decoded pid {task.pid_hex} {task.export}{task.which_launch} {verdict}")


@dataclass
class Decode:
    """A folder decoded: each task's outcome, the lint's and report's work begun beside it,
    and the seconds it took."""

    folder: Path
    outcomes: list[Outcome]
    ahead: Ahead | None
    seconds: float
    #: The traces a folder of JSON traces (no raw capture) was exported from, by file name, at
    #: most :data:`~iket_cli.decode.tasks.MOST_TRACES` of them: its lint and report need not
    #: read them again (a raw capture's decode hands its own over through its outcomes).
    loaded: dict[str, Trace] = field(default_factory=dict)

    def traces(self) -> dict[str, Trace]:
        """The traces this decode assembled or exported from, by file name, taken out: whoever
        takes them decides how long they stay in memory."""
        taken = {**decode_tasks.take_traces(self.outcomes), **self.loaded}
        self.loaded = {}
        return taken

    @property
    def error(self) -> DecodeError | None:
        """The one error of the tasks that failed (None: none did)."""
        failed = [o for o in self.outcomes if o.error]
        return decode_error(failed, len(self.outcomes)) if failed else None


def decode_folder(
    folder: Path,
    formats: list[str],
    *,
    tasks: list[decode_tasks.Task] | None = None,
    jobs: int | None = None,
    progress: pool.Progress | None = None,
    cancel: threading.Event | None = None,
    prestarted: prestart.Prestarted | None = None,
    meanwhile: Callable[[], None] = lambda: None,
) -> Decode:
    """Decode every process's raw capture in ``folder`` into ``formats``, in parallel; a folder
    of JSON traces and no raw capture (an in-process window's) gets its Perfetto traces
    written from the JSON. ``meanwhile`` runs while the workers decode (before the export
    from the JSON, where no worker runs). A task that failed is
    in the outcomes (:attr:`Decode.error`); a full disk raises :class:`DiskFullError`."""
    start = time.monotonic()
    tasks = decode_tasks.plan(folder, formats) if tasks is None else tasks
    if not tasks:
        from . import trace_exports

        meanwhile()
        held = trace_exports.write(folder, formats, hold=decode_tasks.MOST_TRACES)
        return Decode(folder, [], None, round(time.monotonic() - start, 3), held)
    from .finish import Ahead  # imported by the profile's preload while the passes ran

    ahead = Ahead(folder, formats)
    with pool.start(tasks, jobs=jobs, progress=progress, cancel=cancel, prestarted=prestarted) as decoding:
        decoding.listen(ahead.assembled)
        meanwhile()
        outcomes = decoding.wait()
    if any(o.errno in DISK_FULL for o in outcomes):
        raise disk_full(folder, sum(t.output_bytes for t in tasks))
    return Decode(folder, outcomes, ahead, round(time.monotonic() - start, 3))


def decode_error(failed: list[Outcome], tasks: int) -> DecodeError:
    """The one error of a decode that failed for some tasks: the first reason, the others
    (one line per broken file) as details."""
    reasons = list(dict.fromkeys(o.error for o in failed if o.error))
    return DecodeError(
        f"{len(failed)} of {tasks} decodes failed: {reasons[0]}", phase="postprocess", details=reasons[1:]
    )


class Decoded:
    """``iket profile``'s decodes of its capture folders (repeat 1's, then each repeat's),
    adding up the seconds; keeps what each decode knows of the JSON traces it wrote for the
    scan and the reports that follow (:meth:`counted`, :meth:`traces`): they need not read
    those files again. A decode that failed fails the capture."""

    def __init__(
        self,
        transcript: Transcript,
        formats: list[str],
        cancel: threading.Event | None,
        prestarted: prestart.Prestarted | None = None,
    ) -> None:
        self.transcript, self.formats, self.cancel = transcript, formats, cancel
        #: Workers started during the capture pass, for the first decode (then let go).
        self.prestarted = prestarted
        self.seconds: float | None = None
        self._known: dict[Path, list[Outcome]] = {}
        self._ahead: dict[Path, Ahead] = {}
        self._loaded: dict[Path, dict[str, Trace]] = {}

    def __call__(self, folder: Path) -> None:
        """Decode every process's raw capture in ``folder`` into the formats, in parallel."""
        tasks = decode_tasks.plan(folder, self.formats)
        if not tasks and not _traces_in(folder):
            return  # nothing was captured: _missing_artifacts says so
        self.transcript.reporter.phase("postprocess")
        try:
            done = decode_folder(
                folder, self.formats, tasks=tasks, progress=_LoggedProgress(self.transcript),
                cancel=self.cancel, prestarted=self.prestarted,
            )  # fmt: skip
        finally:
            self.close()
        if done.error is not None:
            raise done.error
        self.seconds = round((self.seconds or 0) + done.seconds, 3)
        self._known[folder] = done.outcomes
        if done.ahead is not None:
            self._ahead[folder] = done.ahead
        if done.loaded:
            self._loaded[folder] = done.loaded
        decode_tasks.drop_traces([o for done in self._known.values() for o in done])  # over all folders

    def close(self) -> None:
        """Let go of the prestarted workers the decode did not take (none: nothing to do)."""
        prestarted, self.prestarted = self.prestarted, None
        if prestarted is not None:
            prestarted.close()

    def counted(self, folder: Path) -> dict[str, tuple[int, int]]:
        """The record counts of ``folder``'s JSON traces its decode counted, by file name."""
        return decode_tasks.known_counts(self._known.get(folder, []))

    def joined(self, folder: Path) -> dict[str, dict]:
        """How ``folder``'s decode joined the artifacts it wrote from parts, by file name."""
        return decode_tasks.known_joins(self._known.get(folder, []))

    def ahead(self, folder: Path) -> Ahead | None:
        """The lint's and report's work on ``folder``'s traces begun during its decode
        (:class:`.finish.Ahead`); handed over once."""
        return self._ahead.pop(folder, None)

    def traces(self, folder: Path) -> dict[str, Trace]:
        """The traces ``folder``'s decode assembled, by file name; handed over once (the
        caller's reports free them), so a second call finds none."""
        return {**decode_tasks.take_traces(self._known.get(folder, [])), **self._loaded.pop(folder, {})}


def _traces_in(folder: Path) -> bool:
    from . import trace_exports

    return bool(trace_exports.traces_in(folder))
