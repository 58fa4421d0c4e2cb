"""Decoding inside a capture: each capture folder (repeat 1's, then each repeat's) by the
worker pool, its progress in the log, its failures as errors the capture reports."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..capture.passes import Transcript
from ..decode import pool, prestart
from ..decode import tasks as decode_tasks
from ..decode.tasks import Outcome
from ..errors import DecodeError
from ..system.filesystem import DISK_FULL

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


class Decoded:
    """Decodes a capture folder (repeat 1's, then each repeat's), adding up the seconds, and
    keeps what each decode knows of the JSON traces it wrote for the scan and the reports
    that follow (:meth:`counted`, :meth:`traces`): they need not read those files again."""

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

    def __call__(self, folder: Path) -> None:
        """Decode every process's raw capture in ``folder`` into the formats, in parallel."""
        tasks = decode_tasks.plan(folder, self.formats)
        if not tasks:  # a window's folder: JSON traces and no raw capture (or nothing captured)
            self._from_traces(folder)
            return
        self.transcript.reporter.phase("postprocess")
        start = time.monotonic()
        from .finish import Ahead  # imported by the profile's preload while the passes ran

        ahead = Ahead(folder, self.formats)
        try:
            progress = _LoggedProgress(self.transcript)
            with pool.start(
                tasks, progress=progress, cancel=self.cancel, prestarted=self.prestarted
            ) as decoding:
                decoding.listen(ahead.assembled)
                outcomes = decoding.wait()
        finally:
            self.close()
        if any(o.errno in DISK_FULL for o in outcomes):
            raise OSError(DISK_FULL[0], os.strerror(DISK_FULL[0]))  # named as a full disk by _explained
        errors = list(dict.fromkeys(o.error for o in outcomes if o.error))
        if errors:
            raise DecodeError(f"decoding failed: {errors[0]}", phase="postprocess", details=errors[1:])
        self.seconds = round((self.seconds or 0) + time.monotonic() - start, 3)
        self._known[folder] = outcomes
        self._ahead[folder] = ahead
        decode_tasks.drop_traces([o for done in self._known.values() for o in done])  # over all folders

    def _from_traces(self, folder: Path) -> None:
        """The Perfetto traces of a folder that holds JSON traces alone (an in-process window's)."""
        from . import trace_exports

        if not trace_exports.traces_in(folder):
            return  # nothing was captured: _missing_artifacts says so
        self.transcript.reporter.phase("postprocess")
        start = time.monotonic()
        trace_exports.write(folder, self.formats)
        self.seconds = round((self.seconds or 0) + time.monotonic() - start, 3)

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
        return decode_tasks.take_traces(self._known.get(folder, []))
