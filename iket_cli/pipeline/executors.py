"""Where ``iket run``'s jobs run: the executor interface, and the local executor.

An executor takes the jobs and a ``finished`` callback and returns their results. It
knows nothing of gates, manifests or reports (:mod:`.jobs` does): only how to start a job,
wait for it and stop it. ``local`` runs each job in a thread of this process, pinned to a
GPU of this host; ``slurm`` (:mod:`.slurm`) submits each job to Slurm.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from ..errors import Terminated, signal_of
from ..system import machine, signals
from ..system.runner import wait_all
from .config import Config, Job
from .job import JobResult, run_job

#: Called with each job's result as it ends (gated in place); True stops the run (--fail-fast).
Finished = Callable[[JobResult], bool]


class RunStopped(Exception):
    """Ctrl-C or SIGTERM stopped the run; the executor has stopped its jobs.

    ``results`` are the jobs that ended (stopped ones included), ``signum`` the signal, and
    ``what`` says what the executor did about the rest.
    """

    def __init__(self, results: list[JobResult], signalled: BaseException, what: str) -> None:
        super().__init__(what)
        self.results, self.signum, self.what = results, signal_of(signalled), what


class Executor(Protocol):
    """Runs jobs; never raises for a job's failure (see ``JobResult.status``)."""

    #: As ``--executor`` and the run manifest name it (``model.vocab.EXECUTORS``).
    name: str

    def execute(self, jobs: list[Job], finished: Finished) -> list[JobResult]: ...


def gpu_slots() -> list[str]:
    """GPU indices for pinning: ``$IKET_GPUS`` (comma list) or what nvidia-smi lists."""
    override = os.environ.get("IKET_GPUS")
    if override is not None:
        return [g.strip() for g in override.split(",") if g.strip()]
    return [gpu["index"] for gpu in machine.query_gpus()]


class LocalExecutor:
    """Jobs in threads of this process, ``workers`` at a time, each on a GPU of its own.

    Ctrl-C or SIGTERM (which only the main thread receives) cancel every running job's
    capture, whose trees are stopped and evidence kept; jobs not started are left out.
    """

    name = "local"

    def __init__(
        self,
        config: Config,
        root: Path,
        overrides: dict[str, Any],
        *,
        workers: int | str | None = 1,
        reporter_for=None,
    ) -> None:
        self.config, self.root, self.overrides = config, root, overrides
        self.workers, self.reporter_for = workers or 1, reporter_for

    def execute(self, jobs: list[Job], finished: Finished) -> list[JobResult]:
        slots = gpu_slots()
        count = (len(slots) or 1) if self.workers == "auto" else int(self.workers)
        free: queue.Queue[str | None] = queue.Queue()
        for slot in (slots or [None]) * (1 if slots else count):
            free.put(slot)
        stop, cancel = threading.Event(), threading.Event()

        def one(job: Job) -> JobResult | None:
            if stop.is_set() or cancel.is_set():
                return None
            gpu = free.get()
            try:
                reporter = self.reporter_for(job.name) if self.reporter_for else None
                result = run_job(self.config, job, self.root, self.overrides, gpu, reporter, cancel)
                if finished(result):
                    stop.set()
            finally:
                free.put(gpu)
            return result

        pool = ThreadPoolExecutor(max_workers=max(1, count))
        futures = [pool.submit(one, job) for job in jobs]
        try:
            with signals.as_exception():
                wait_all(futures)
        except (KeyboardInterrupt, Terminated) as signalled:
            cancel.set()
            pool.shutdown(wait=True)
            results = [r for f in futures if not f.cancelled() and (r := f.result()) is not None]
            raise RunStopped(
                results, signalled, f"{len(jobs) - len(results)} job(s) not run, the running ones stopped"
            ) from None
        finally:
            pool.shutdown(wait=True)
        return [r for f in futures if (r := f.result()) is not None]
