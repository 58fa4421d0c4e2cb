"""Decoding many tasks at once: worker processes bounded by the CPUs and the free memory.

run-iket decodes one process after another, one format after another, on one core. Here
the tasks run in parallel, each small one in this process and each large one in a worker
process of its own (``python -m iket_cli.decode.worker``), so a decoder that crashes on a
corrupt capture fails that task alone. An interrupt kills the workers, removes their
half-written files and raises :class:`~iket_cli.errors.CaptureInterrupted`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..capture import spawn
from ..capture.runner import Terminated, sigterm_as_exception
from ..errors import CaptureInterrupted
from . import export
from .tasks import Outcome, Task, missing_input

#: Below this many raw bytes a capture is decoded in-process: spawning costs more than it saves.
INLINE_BYTES = 4 << 20


class Progress:
    """What :func:`run` reports while it decodes. The default says nothing."""

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


def run(tasks: list[Task], *, jobs: int | None = None, progress: Progress | None = None) -> list[Outcome]:
    """Run every task; never raises for a task's failure (see ``Outcome.error``)."""
    progress = progress or Progress()
    workers = default_jobs(tasks, jobs)
    lock = threading.Lock()

    def one(task: Task) -> Outcome:
        with lock:
            progress.started(task)
        missing = missing_input(task)  # the decoder aborts its process on a truncated file
        if missing:
            outcome = Outcome(task, 0.0, error=missing)
        elif task.raw_bytes <= INLINE_BYTES and export.available():
            outcome = export.decode(task)
        else:
            outcome = _decode_in_child(task)
        with lock:
            progress.finished(outcome)
        return outcome

    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        with sigterm_as_exception():
            return list(pool.map(one, tasks))
    except (KeyboardInterrupt, Terminated) as signalled:
        signum = signal.SIGTERM if isinstance(signalled, Terminated) else signal.SIGINT
        pool.shutdown(wait=False, cancel_futures=True)
        _cancel()
        pool.shutdown(wait=True)
        _remove_partials(tasks)
        raise CaptureInterrupted(
            f"interrupted by {signal.Signals(signum).name} while decoding",
            phase="postprocess",
            exit_code=128 + signum,
        ) from None
    finally:
        pool.shutdown(wait=True)


_WORKERS: set[subprocess.Popen] = set()


def _cancel() -> None:
    """Kill every running decode worker (on an interrupt)."""
    for proc in list(_WORKERS):
        proc.kill()


def _remove_partials(tasks: list[Task]) -> None:
    """Temporary files of killed workers: half-written artifacts and launch parts."""
    for task in tasks:
        leftovers = [export.temporary(task.out_dir / name) for name in task.outputs()]
        leftovers += task.raw.parent.glob(f".part*.{task.raw.name}")
        leftovers += task.raw.parent.glob(f".part*.{task.raw.stem}.out")
        for path in leftovers:
            path.unlink(missing_ok=True)


def _decode_in_child(task: Task) -> Outcome:
    start = time.monotonic()
    spec = json.dumps(
        {
            "pid_hex": task.pid_hex,
            "raw": str(task.raw),
            "out_dir": str(task.out_dir),
            "export": task.export,
            "formats": list(task.formats),
        }
    )
    proc = spawn.start(
        [sys.executable, "-m", "iket_cli.decode.worker", spec],
        stdout=spawn.DEVNULL,
        stderr=spawn.PIPE,
        text=True,
    )
    with proc:
        _WORKERS.add(proc)
        try:
            _, stderr = proc.communicate()
        finally:
            _WORKERS.discard(proc)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        last = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        if proc.returncode < 0:
            last = f"the decoder crashed (signal {-proc.returncode})"
        return Outcome(task, seconds, error=f"{task.raw}: {last}")
    return Outcome(task, seconds, written=task.outputs())
