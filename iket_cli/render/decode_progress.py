"""What ``iket postprocess`` shows while it decodes: per process and export, a live rich
table on a terminal, plain lines otherwise, and the time left."""

from __future__ import annotations

import sys
import time
from typing import Any

from ..decode.tasks import Outcome, Progress, Task
from ..model.vocab import FORMAT_EXPORTS, JSON_EXPORT, PERFETTO_EXPORT
from .progress import fancy_allowed, say


class DecodeProgress(Progress):
    """Per process and export: a live rich table on a terminal, plain lines otherwise."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.fancy = not quiet and fancy_allowed(sys.stderr)
        self._rows: dict[Any, Any] = {}
        self._weights: dict[Task, int] = {}
        self._done: list[Task] = []
        self._began = time.monotonic()

    def planned(self, units: list[Task]) -> None:
        """Each decode weighs its raw bytes: the time left is estimated from those done."""
        self._weights = {unit: max(1, unit.memory) for unit in units}
        self._began = time.monotonic()
        if self.fancy and len(units) > 1:
            self._rows["all"] = self._progress.add_task(f"decoding: 0 of {len(units)}", total=len(units))

    def __enter__(self) -> DecodeProgress:
        if self.fancy:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            from .text import rich_console

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=rich_console(stderr=True),
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fancy:
            self._progress.stop()

    @staticmethod
    def _label(task: Task) -> str:
        if task.part:
            return f"pid {task.pid_hex} {task.export}{task.which_launch}"
        export = (
            JSON_EXPORT
            if task.export == JSON_EXPORT
            else "+".join(f for f in task.formats if PERFETTO_EXPORT in FORMAT_EXPORTS[f])
        )
        return f"pid {task.pid_hex} {export}"

    def started(self, task: Task) -> None:
        if self.fancy:
            self._rows[task] = self._progress.add_task(self._label(task), total=1)
        elif not self.quiet:
            say(f"iket: decoding {self._label(task)}...")

    def finished(self, outcome: Outcome) -> None:
        label = self._label(outcome.task)
        verdict = f"failed: {outcome.error}" if outcome.error else f"done in {outcome.seconds:.1f} s"
        if outcome.cancelled:  # stopped by an interrupt: the interrupt itself is reported
            verdict = "cancelled"
        elif outcome.task in self._weights and len(self._weights) > 1:
            self._done.append(outcome.task)
            verdict += f" ({self._count_line()})"
            if "all" in self._rows:
                self._progress.update(
                    self._rows["all"], completed=len(self._done), description=self._count_line()
                )
        if self.fancy:
            self._progress.update(
                self._rows[outcome.task],
                completed=1,
                description=f"{label} {'[red]failed[/]' if outcome.error else ''}",
            )
        elif not self.quiet or outcome.error:
            say(f"iket: {label} {verdict}")

    def _count_line(self) -> str:
        """``2 of 5 decodes done, about 14 s left``."""
        done = sum(self._weights[t] for t in self._done)
        left = time_left(time.monotonic() - self._began, done, sum(self._weights.values()))
        text = f"{len(self._done)} of {len(self._weights)} decodes done"
        return text + (f", about {left:.0f} s left" if left else "")


def time_left(elapsed: float, done: float, total: float) -> float | None:
    """Seconds left if the rest goes as fast as what is done (by weight); None before any."""
    if done <= 0 or done >= total:
        return None
    return elapsed * (total - done) / done
