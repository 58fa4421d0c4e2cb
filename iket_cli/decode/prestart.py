"""Long-lived decode workers started before the decode knows its work.

A worker's start (an interpreter, numpy, NVIDIA's decoder) is a quarter of a second on an
idle core and most of a second on the GPU machine's VM with fifteen others starting beside
it; the decode's first units waited for it. ``iket profile`` starts the workers when its
passes start, ``iket postprocess`` before it imports the decode (this module imports
nothing heavy, so the workers start within the CLI's first tenth of a second); the decode
takes them (:meth:`.workers.Workers.server`) and those it does not take are let go
(:meth:`Prestarted.close`). Each dies with the CLI, as every worker does
(docs/history/benchmarks.md, "Workers started during the capture pass").
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading

from ..system import spawn
from .split import chunks
from .tasks import INLINE_BYTES, Task

#: glibc's allocator in a long-lived worker: large blocks from the heap, not fresh mappings,
#: and freed memory kept for the next chunk (its pages already faulted in).
KEEP_FREED = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184"
#: A worker's numpy with one BLAS thread: it does no linear algebra, and OpenBLAS starting a
#: thread a CPU at import cost a worker about 0.1 s of CPU (docs/history/benchmarks.md, "The
#: Perfetto export's moves, and less to start").
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}
#: The free memory a prestarted worker is counted to take (some 30 MB once the decoder is
#: imported, its first unit's pages on top).
PRESTARTED_BYTES = 256 << 20


class Prestarted:
    """``count`` long-lived workers, each importing NVIDIA's decoder, waiting for work."""

    def __init__(self, count: int) -> None:
        self._lock = threading.Lock()
        self._waiting: list[tuple[subprocess.Popen, object]] = []
        for _ in range(count):
            errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 - the server's, or closed by close()
            try:
                argv, options = serving(errors)
                self._waiting.append((worker(argv, **options), errors))
            except BaseException:
                errors.close()
                self.close()
                raise

    def take(self) -> tuple[subprocess.Popen, object] | None:
        """A waiting worker and its stderr file, or None once none is left."""
        with self._lock:
            return self._waiting.pop() if self._waiting else None

    def close(self) -> None:
        """Let every worker not taken end (its input closed) and wait for it."""
        with self._lock:
            left, self._waiting = self._waiting, []
        for proc, errors in left:
            let_go(proc, errors)


def start(jobs: int | None = None) -> Prestarted:
    """Workers for a decode to come: ``jobs``, or one a CPU, as many as the free memory
    holds at :data:`PRESTARTED_BYTES` each."""
    count = jobs or cpus()
    available = mem_available()
    if available:
        count = max(1, min(count, available // PRESTARTED_BYTES))
    return Prestarted(count)


def for_tasks(tasks: list[Task], jobs: int | None = None) -> Prestarted | None:
    """:func:`start` for a decode of ``tasks``, when one of them is decoded by workers (over
    :data:`INLINE_BYTES` of raw data), else None: as many as its exports' units may run side
    by side (about; the raw manifests are not read here), within ``jobs`` or the CPUs.
    Workers that would only wait cost the host an interpreter each (keep256 on 16 CPUs:
    six decode at once, sixteen were started; docs/history/benchmarks.md, "The Perfetto export's
    moves, and less to start")."""
    big = [task for task in tasks if task.raw_bytes > INLINE_BYTES]
    if not big:
        return None
    most = jobs or cpus()
    return start(min(most, sum(_side_by_side(task, most) for task in big)))


def _side_by_side(task: Task, cpus: int) -> int:
    """About how many units of ``task`` run at once: its chunks within its memory bound."""
    units = -(-task.raw_bytes // chunks.chunk_bytes(task.export, task.raw_bytes, cpus))
    return min(units, task.most_at_once(units))


def cpus() -> int:
    return (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()) or 1


def mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def let_go(proc: subprocess.Popen, errors) -> None:
    """A long-lived worker never given work: its input closed, it ends (or is killed)."""
    with contextlib.suppress(OSError):
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()
    errors.close()


def worker(argv: list[str], **options) -> subprocess.Popen:
    """``python -m iket_cli.decode.worker_main ARGV`` in a session of its own."""
    argv = [sys.executable, "-m", "iket_cli.decode.worker_main", *argv]
    return spawn.start(argv, new_session=True, **options)


def serving(errors) -> tuple[list[str], dict]:
    """The argv and options of a long-lived worker whose stderr goes to ``errors``."""
    env = dict(os.environ)
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), KEEP_FREED]))
    env.update(ONE_BLAS_THREAD)
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": errors}
    options = {"env": env, **pipes, "text": True}
    return ["--serve", str(os.getpid())], options
