"""The Slurm executor of ``iket run``: one ``sbatch`` per job, watched with ``squeue``.

One batch job per capture job, not one array: jobs differ in their time limits, GPUs,
partitions and environments (per-job ``slurm`` tables), which an array cannot express;
each can be cancelled, timed and resubmitted (``--rerun-failed``) on its own; and a
project's suite is tens of jobs, not thousands. ``--jobs N`` caps how many are in the
queue at once (as an array's ``%N`` would); by default all are submitted at once.

Each batch script runs ``iket run --job-result FILE NAME`` on its node, which captures the
job by the same code as the local executor (:func:`iket_cli.pipeline.job.run_job`) into
the shared output root and writes its :class:`JobResult` as JSON; this process reads it
and adds Slurm's view (job id, state, node, queue and run times). A job that Slurm ended
(time limit, preemption, node failure, out of memory, ``scancel``) is reported with
Slurm's state and exit code, and keeps the ``.failed/`` evidence that iket, stopped by
Slurm's SIGTERM, wrote there.

The scripts, Slurm's logs and the results live in ``<output root>/.iket-slurm/``, beside
a ledger of the submitted job ids: a run that is killed outright leaves its jobs queued,
and the next run over the same root cancels them first.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..capture import targets
from ..errors import ExitCode, IketError, Terminated
from ..model import atomic, jsonio
from ..model.vocab import FAILED_SUFFIX, JOB_FAILING, MANIFEST_NAME, SLURM_DIR
from ..system import signals, slurm_cli
from .config import Config, Job
from .executors import Finished, RunStopped
from .job import JobResult, rel, tail

#: Seconds between two polls of squeue: the first after a change, and the most (backoff).
POLL_MIN_S = 0.5
POLL_MAX_S = 10.0
#: Polls in a row in which Slurm does not know a job before iket gives it up as lost.
LOST_AFTER = 3
#: Seconds iket waits for the result of a job that Slurm has just ended (iket inside is
#: still stopping its capture; Slurm's KillWait is the most it has before SIGKILL).
RESULT_GRACE_S = 20.0
#: Seconds iket waits for cancelled jobs to leave the nodes after a Ctrl-C.
CANCEL_WAIT_S = 60.0
LEDGER = "submitted.json"
#: Slurm states that mean Slurm ended the job, with iket's status and what happened.
ENDED_BY_SLURM = {
    "TIMEOUT": ("timeout", "the Slurm time limit ended the job"),
    "DEADLINE": ("timeout", "the job's Slurm deadline passed"),
    "CANCELLED": ("cancelled", "cancelled outside iket (scancel)"),
    "PREEMPTED": ("failed", "Slurm preempted the job"),
    "NODE_FAIL": ("failed", "the job's node failed"),
    "BOOT_FAIL": ("failed", "the job's node failed to boot"),
    "OUT_OF_MEMORY": ("failed", "the job ran out of memory (Slurm's limit)"),
}


class Watcher(Protocol):
    """What the console shows: each job's state changes, and notes about the whole run."""

    def changed(self, name: str, job: slurm_cli.SlurmJob) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


class _Silent:
    def changed(self, name: str, job: slurm_cli.SlurmJob) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class _Entry:
    job: Job
    state: slurm_cli.SlurmJob
    result: Path
    log: Path
    cancelled_by: str | None = None
    unseen: int = 0


class SlurmExecutor:
    """Each job a Slurm batch job; this process submits, watches, cancels and collects."""

    name = "slurm"

    def __init__(
        self,
        config: Config,
        root: Path,
        overrides: dict[str, Any],
        *,
        limit: int | None = None,
        watcher: Watcher | None = None,
    ) -> None:
        self.config, self.root, self.overrides = config, root.resolve(), overrides
        self.limit, self.watcher = limit, watcher or _Silent()
        self.folder = self.root / SLURM_DIR
        table = config.defaults.get("slurm", {})
        self.poll_max = float(table.get("poll", POLL_MAX_S))

    # -- the run ---------------------------------------------------------------------------
    def execute(self, jobs: list[Job], finished: Finished) -> list[JobResult]:
        for job in jobs:
            self._check_target(job)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._cancel_leftovers()
        waiting, active, results = list(jobs), {}, []
        interval, stop_reason = POLL_MIN_S, None
        try:
            with signals.as_exception():
                while waiting or active:
                    while waiting and stop_reason is None and self._room(active):
                        entry = self._submit(waiting.pop(0))
                        active[entry.state.job_id] = entry
                        self._ledger(active)
                    changed = False
                    for result in self._poll(active):
                        changed = True
                        results.append(result)
                        if finished(result) and stop_reason is None:
                            stop_reason = f"--fail-fast after {result.name} {result.status}"
                            self._cancel(active, stop_reason)
                            waiting.clear()
                    self._ledger(active)
                    if active:
                        interval = POLL_MIN_S if changed else min(self.poll_max, interval * 1.5)
                        time.sleep(interval)
        except (KeyboardInterrupt, Terminated) as signalled:
            results += self._stop_all(active, "cancelled by a Ctrl-C of iket run")
            self._ledger(active)
            raise RunStopped(
                results,
                signalled,
                f"{len(results)} job(s) ended, {len(waiting)} not submitted; the submitted ones "
                "were cancelled (scancel)",
            ) from None
        except IketError as error:  # sbatch refused a job, or Slurm stopped answering
            if active:
                self._cancel(active, "iket run stopped")
                error.message += f"; the {len(active)} job(s) submitted before were cancelled"
            raise
        finally:
            self.watcher.close()
        return results

    def _check_target(self, job: Job) -> None:
        """The job's target checked here, before the first sbatch: on a cluster a typo found
        on the node costs hours in the queue (the nodes see the submitting host's files)."""
        env = {**os.environ, **self.config.defaults.get("env", {}), **job.options.get("env", {})}
        python = job.options.get("python") or self.config.defaults.get("python") or sys.executable
        try:
            targets.resolve(
                targets.parse(*job.words()), cwd=job.cwd or self.config.path.parent, python=python, env=env
            )
        except IketError as error:
            error.message = f"job {job.name}: {error.message}; nothing was submitted"
            raise

    def _table(self, job: Job) -> dict[str, Any]:
        """The job's ``[slurm]`` keys: its own ``slurm`` table over the top-level one."""
        return {**self.config.defaults.get("slurm", {}), **job.options.get("slurm", {})}

    def _room(self, active: dict[str, _Entry]) -> bool:
        """Whether ``--jobs N`` lets one more job into the queue."""
        return self.limit is None or len(active) < self.limit

    def _submit(self, job: Job) -> _Entry:
        script = self.folder / f"{job.name}.sbatch"
        result = self.folder / f"{job.name}.result.json"
        log = self.folder / f"{job.name}.log"
        result.unlink(missing_ok=True)
        script.write_text(self._script(job), encoding="utf-8")
        options = slurm_cli.options(self._table(job))
        job_id = slurm_cli.submit(script, options, cwd=Path.cwd(), log=log, name=f"iket:{job.name}")
        state = slurm_cli.SlurmJob(job_id, "PENDING")
        self.watcher.changed(job.name, state)
        return _Entry(job, state, result, log)

    def _script(self, job: Job) -> str:
        """The batch script: this iket, on the node, capturing the one job into the root."""
        python = self._table(job).get("python") or sys.executable
        argv = [
            python,
            "-m",
            "iket_cli",
            "run",
            "--config",
            str(self.config.path.resolve()),
            "--output",
            str(self.root),
            "--executor",
            "local",
            "--job-result",
            str(self.folder / f"{job.name}.result.json"),
        ]
        for key in ("postprocess", "timeout"):
            if self.overrides.get(key) is not None:
                argv += [f"--{key}", str(self.overrides[key])]
        if self.overrides.get("keep"):
            argv.append("--keep")
        return (
            "#!/bin/sh\n"
            f"# iket run --executor slurm: job {job.name!r}, written by iket; Slurm runs it on the node.\n"
            f"exec {shlex.join([*argv, '--', job.name])}\n"
        )

    # -- watching ----------------------------------------------------------------------------
    def _poll(self, active: dict[str, _Entry]) -> list[JobResult]:
        """One squeue call; the results of the jobs that ended since the last."""
        seen = slurm_cli.poll(active)
        ended = []
        grace = time.monotonic() + RESULT_GRACE_S
        for job_id, entry in list(active.items()):
            now = seen.get(job_id)
            if now is None:
                entry.unseen += 1
                now = slurm_cli.details(entry.state)  # scontrol or sacct may still know it
                if not now.finished and entry.unseen < LOST_AFTER:
                    continue
            elif now.finished:
                now = slurm_cli.details(now)  # the exit code
            if now.phase == "pending" and entry.state.phase == "running":  # Slurm put it back
                self.watcher.note(
                    f"Slurm requeued {entry.job.name} (job {job_id}: {now.reason or 'requeued'}); "
                    "iket waits for its rerun"
                )
            if now.state != entry.state.state or now.node != entry.state.node:
                self.watcher.changed(entry.job.name, now)
            entry.state = now
            if now.finished or entry.unseen >= LOST_AFTER:
                del active[job_id]
                ended.append(self._result(entry, now, grace))
        return ended

    def _result(self, entry: _Entry, job: slurm_cli.SlurmJob, grace: float = 0.0) -> JobResult:
        """The job's record: iket's own from the node where there is one, Slurm's view added.

        Slurm calls a job cancelled or timed out as soon as it signals it; iket inside may
        still be stopping its capture and writing its result: that is awaited until ``grace``.
        """
        name = entry.job.name
        while not entry.result.exists() and job.started and time.monotonic() < grace:
            time.sleep(0.1)
        mine = JobResult.load(entry.result)
        record = {**job.record(), "log": rel(entry.log, self.root)}
        if mine is None:
            failed = self.root / f"{name}{FAILED_SUFFIX}"
            kept = (failed / MANIFEST_NAME).is_file()
            mine = JobResult(
                name,
                "error",
                record["run_s"] or 0.0,
                rel(failed if kept else self.root / name, self.root),
                rel(failed / MANIFEST_NAME, self.root) if kept else None,
                f"the job ended before iket reported ({_said(job)}); see {record['log']}",
                _exit_code(job),
            )
        mine.slurm = record
        if job.state in ENDED_BY_SLURM:  # Slurm ended it: that is what happened, whatever iket wrote then
            status, what = ENDED_BY_SLURM[job.state]
            mine.status, mine.exit_code = status, _exit_code(job, status)
            if job.state == "CANCELLED":
                what = entry.cancelled_by or what
            ran = record["run_s"]
            mine.error = f"{what}{f' after {ran:.0f} s' if ran is not None else ''} ({_said(job)})"
        elif entry.unseen >= LOST_AFTER and not job.finished:
            mine.error = f"Slurm no longer knows job {job.job_id} ({_said(job)})"
        if mine.status in JOB_FAILING and not mine.log_tail:
            mine.log_tail = tail(entry.log)
        return mine

    # -- stopping ------------------------------------------------------------------------------
    def _cancel(self, active: dict[str, _Entry], why: str) -> None:
        for entry in active.values():
            entry.cancelled_by = why
        if active:
            self.watcher.note(f"cancelling {len(active)} Slurm job(s) ({why}): {' '.join(active)}")
            slurm_cli.cancel(list(active))

    def _stop_all(self, active: dict[str, _Entry], why: str) -> list[JobResult]:
        """scancel every submitted job, then wait (bounded; a second Ctrl-C stops waiting)
        until Slurm has ended them, so that iket inside each has kept its evidence."""
        self._cancel(active, why)
        results: list[JobResult] = []
        deadline = time.monotonic() + CANCEL_WAIT_S
        try:
            while active and time.monotonic() < deadline:
                results += self._poll(active)
                if active:
                    time.sleep(POLL_MIN_S)
        except (KeyboardInterrupt, Terminated):
            self.watcher.note("no longer waiting for Slurm to end the cancelled jobs")
        grace = time.monotonic() + RESULT_GRACE_S
        for entry in list(active.values()):  # cancelled, not yet reported ended
            results.append(self._result(entry, entry.state, grace))
        return results

    def _ledger(self, active: dict[str, _Entry]) -> None:
        """The ids still in Slurm's hands, for the next run to cancel if this one is killed."""
        path = self.folder / LEDGER
        if not active:
            path.unlink(missing_ok=True)
            return
        atomic.write(path, json.dumps({i: e.job.name for i, e in active.items()}) + "\n")

    def _cancel_leftovers(self) -> None:
        """Jobs that a killed ``iket run`` over this root left in the queue are cancelled now:
        they would write into the folders this run is about to fill."""
        path = self.folder / LEDGER
        try:
            listed = jsonio.parse(path.read_text())
        except (OSError, ValueError):
            return
        alive = [i for i, job in slurm_cli.poll(list(listed)).items() if not job.finished]
        if alive:
            slurm_cli.cancel(alive)
            self.watcher.note(
                f"cancelled {len(alive)} Slurm job(s) left in the queue by an earlier iket run "
                f"over this output root that was killed: {' '.join(alive)}"
            )
        deadline = time.monotonic() + CANCEL_WAIT_S  # until they are gone from the folders
        while alive and time.monotonic() < deadline:
            time.sleep(POLL_MIN_S)
            alive = [i for i, job in slurm_cli.poll(alive).items() if not job.finished]
        path.unlink(missing_ok=True)


def _said(job: slurm_cli.SlurmJob) -> str:
    """``state TIMEOUT, exit code 0, signal 15, on node gpu07``."""
    parts = [f"state {job.state}"]
    if job.exit_code is not None:
        parts.append(f"exit code {job.exit_code}")
    if job.signal:
        parts.append(f"signal {job.signal}")
    if job.node:
        parts.append(f"on node {job.node}")
    return ", ".join(parts)


def _exit_code(job: slurm_cli.SlurmJob, status: str = "") -> int:
    """The job's exit code as ``iket run`` documents them: 124 for a time limit, 143 for a
    cancelled job (Slurm stops it with SIGTERM), else Slurm's exit code or 128 + signal."""
    if status in ("timeout", "cancelled"):
        return ExitCode.TIMEOUT if status == "timeout" else ExitCode.TERMINATED
    if job.signal:
        return 128 + job.signal
    return job.exit_code if job.exit_code else 1
