"""What ``iket run --executor slurm`` shows while Slurm runs the jobs.

Every state change of a job is one line on stderr (``[name] Slurm job 12: running on
gpu07 after 3 s in the queue``), so a CI log reads as a history. On a terminal a live
line below them counts the jobs per state and the time since the first submission.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from typing import Any

from ..system.slurm_cli import SlurmJob
from .progress import fancy_allowed

#: The order of the counts on the live line.
_ORDER = ("pending", "running", "done", "failed", "timeout", "cancelled")


class QueueWatcher:
    """Lines per state change; on a terminal, a live count of the jobs per state."""

    _lock = threading.Lock()

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.fancy = not quiet and fancy_allowed(sys.stderr)
        self.phases: dict[str, str] = {}
        self._started = time.monotonic()
        self._live: Any = None

    def changed(self, name: str, job: SlurmJob) -> None:
        self.phases[name] = job.phase
        text = f"[{name}] Slurm job {job.job_id}: {job.phase}{_detail(job)}"
        failing = job.finished and job.state != "COMPLETED"
        if not self.quiet or failing:
            self._say(text)
        self._refresh()

    def note(self, text: str) -> None:
        self._say(f"iket: {text}")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _say(self, text: str) -> None:
        with self._lock:
            if self._live is not None:
                self._live.console.print(text, markup=False, highlight=False)
            else:
                sys.stderr.write(text + "\n")
                sys.stderr.flush()

    def _refresh(self) -> None:
        if not self.fancy:
            return
        if self._live is None:
            from rich.live import Live

            from .text import rich_console

            self._live = Live(console=rich_console(stderr=True), transient=True, refresh_per_second=4)
            self._live.start()
        self._live.update(self.counts_line())

    def counts_line(self) -> str:
        """``Slurm: 1 pending · 2 running · 3 done (41 s)``."""
        counts = Counter(self.phases.values())
        named = [f"{counts.pop(p)} {p}" for p in _ORDER if p in counts]
        named += [f"{n} {p}" for p, n in sorted(counts.items())]
        return f"Slurm: {' · '.join(named)} ({time.monotonic() - self._started:.0f} s)"


def _detail(job: SlurmJob) -> str:
    """What goes with a phase: where it runs, how long it queued or ran, why it waits."""
    if job.phase == "pending":
        return f" ({job.reason})" if job.reason and job.reason != "None" else ""
    if job.phase == "running":
        queued = job.seconds(job.submitted, job.started)
        return (f" on {job.node}" if job.node else "") + (
            f" after {queued:.0f} s in the queue" if queued is not None else ""
        )
    ran = job.seconds(job.started, job.ended)
    parts = [f"state {job.state}"] if job.phase != job.state.lower() else []
    if job.exit_code is not None and job.state != "COMPLETED":
        parts.append(f"exit code {job.exit_code}")
    if ran is not None:
        parts.append(f"ran {ran:.0f} s")
    return f" ({', '.join(parts)})" if parts else ""
