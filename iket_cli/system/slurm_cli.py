"""Slurm, driven through its own command-line tools and their parseable output.

``sbatch --parsable`` submits, ``squeue --states=all`` reports every job's state in one
call per poll, ``scontrol show job`` (or ``sacct``, where the cluster keeps accounting)
gives a finished job's exit code, and ``scancel`` cancels. No Slurm library is linked:
the tools are what every cluster has and what its users already read, and their output
formats (``-o``/``--parsable2``) are stable across releases.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import CaptureError, ToolchainError
from . import spawn

#: The tools iket drives; ``iket doctor`` looks for each.
TOOLS = ("sbatch", "squeue", "scontrol", "scancel", "sacct", "sinfo")
#: Seconds a Slurm tool may take to answer before iket calls the cluster unreachable.
ANSWER_S = 60.0
#: Slurm's words for a job that will not run again.
TERMINAL = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "CANCELLED",
        "PREEMPTED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)
#: What each Slurm state is called on iket's console.
PHASES = {
    "PENDING": "pending",
    "CONFIGURING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending",
    "RESV_DEL_HOLD": "pending",
    "SUSPENDED": "suspended",
    "STOPPED": "suspended",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "COMPLETED": "done",
    "FAILED": "failed",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "CANCELLED": "cancelled",
    "PREEMPTED": "preempted",
    "NODE_FAIL": "node failure",
    "BOOT_FAIL": "node failure",
    "OUT_OF_MEMORY": "out of memory",
}
#: squeue's fields, in the order of its ``-o`` format below.
_SQUEUE_FIELDS = ("job_id", "state", "node", "submitted", "started", "ended", "reason")
_SQUEUE_FORMAT = "%i|%T|%N|%V|%S|%e|%r"
_SACCT_FIELDS = "JobID,State,ExitCode,NodeList,Submit,Start,End"


@dataclass
class SlurmJob:
    """One job as Slurm reports it; times are Slurm's (the cluster's local time), or None."""

    job_id: str
    state: str
    node: str | None = None
    submitted: str | None = None
    started: str | None = None
    ended: str | None = None
    reason: str | None = None
    #: The batch script's exit status, and the signal that ended it (0 if none).
    exit_code: int | None = None
    signal: int = 0
    #: How often Slurm requeued the job (a node failure, a preemption): it ran that many times more.
    restarts: int = 0

    @property
    def phase(self) -> str:
        return PHASES.get(self.state, self.state.lower())

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    def seconds(self, since: str | None, until: str | None) -> float | None:
        start, end = _when(since), _when(until)
        return None if start is None or end is None else max(0.0, (end - start).total_seconds())

    def record(self) -> dict[str, Any]:
        """What a run manifest keeps of the job (docs/ci.md, ``iket run --executor slurm``)."""
        return {
            "job_id": self.job_id,
            "state": self.state,
            "exit_code": self.exit_code,
            "signal": self.signal or None,
            "node": self.node,
            "restarts": self.restarts,
            "submitted_at": self.submitted,
            "started_at": self.started,
            "ended_at": self.ended,
            "queued_s": self.seconds(self.submitted, self.started),
            "run_s": self.seconds(self.started, self.ended),
        }


def _when(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _clean(value: str) -> str | None:
    value = value.strip()
    return None if value in ("", "N/A", "Unknown", "None", "(null)", "n/a") else value


def missing_tools(env: Mapping[str, str] | None = None) -> list[str]:
    """The Slurm tools iket needs that are not on PATH (``sacct`` is optional)."""
    path = (env or {}).get("PATH") if env is not None else None
    return [tool for tool in TOOLS if tool != "sacct" and shutil.which(tool, path=path) is None]


def _run(argv: list[str], *, what: str) -> spawn.Completed:
    """Run one Slurm tool; a tool that is missing or hangs is a one-line error naming it."""
    if shutil.which(argv[0]) is None:
        raise ToolchainError(
            f"{argv[0]} not found: --executor slurm needs Slurm's command-line tools",
            hint="run iket on a login node of the cluster, or use --executor local",
        )
    done = spawn.run(argv, timeout=ANSWER_S)
    if done.returncode != 0 and what:
        raise CaptureError(f"{what}: {done.last_line()}", hint=f"the command was: {spawn.quote(argv)}")
    return done


def submit(script: Path, options: list[str], *, cwd: Path, log: Path, name: str) -> str:
    """``sbatch`` one batch script; returns the job id. Its output goes to ``log``."""
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={name}",
        f"--output={log}",
        f"--chdir={cwd}",
        *options,
        str(script),
    ]
    done = _run(argv, what=f"sbatch refused job {name}")
    job_id = done.stdout.strip().splitlines()[-1].split(";")[0] if done.stdout.strip() else ""
    if not job_id.isdigit():
        raise CaptureError(f"sbatch gave no job id for {name}: {done.stdout.strip()!r}")
    return job_id


def poll(job_ids: Iterable[str]) -> dict[str, SlurmJob]:
    """Every listed job squeue still knows, in one call (finished jobs stay for ``MinJobAge``)."""
    ids = list(job_ids)
    if not ids:
        return {}
    done = _run(
        ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}", "-o", _SQUEUE_FORMAT], what=""
    )
    if done.returncode != 0:  # only unknown ids (aged out): squeue refuses the whole list
        return {}
    jobs = {}
    for line in done.stdout.splitlines():
        values = line.split("|")
        if len(values) != len(_SQUEUE_FIELDS):
            continue
        fields = dict(zip(_SQUEUE_FIELDS, values, strict=True))
        jobs[fields["job_id"]] = SlurmJob(
            fields["job_id"],
            fields["state"].split()[0],
            **{k: _clean(fields[k]) for k in ("node", "submitted", "started", "ended", "reason")},
        )
    return jobs


def details(job: SlurmJob) -> SlurmJob:
    """``job`` with its exit code (``scontrol show job``; ``sacct`` once scontrol forgot it)."""
    job = replace(job)
    done = _run(["scontrol", "show", "job", "--oneliner", job.job_id], what="")
    fields = _pairs(done.stdout) if done.returncode == 0 else {}
    if not fields:
        return _accounted(job)
    exit_code, _, signum = fields.get("ExitCode", "").partition(":")
    job.state = fields.get("JobState", job.state).split()[0]
    job.node = _clean(fields.get("NodeList", "")) or job.node
    job.submitted = _clean(fields.get("SubmitTime", "")) or job.submitted
    job.started = _clean(fields.get("StartTime", "")) or job.started
    job.ended = _clean(fields.get("EndTime", "")) or job.ended
    job.reason = _clean(fields.get("Reason", "")) or job.reason
    job.restarts = int(fields["Restarts"]) if fields.get("Restarts", "").isdigit() else job.restarts
    job.exit_code = int(exit_code) if exit_code.isdigit() else None
    job.signal = int(signum) if signum.isdigit() else 0
    return job


def _pairs(text: str) -> dict[str, str]:
    """scontrol's ``Key=Value Key=Value`` line as a dict (values have no spaces but Reason's)."""
    pairs: dict[str, str] = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if eq:
            pairs[key] = value
    return pairs


def _accounted(job: SlurmJob) -> SlurmJob:
    """The job from ``sacct`` (clusters with accounting keep it long after squeue forgets)."""
    if shutil.which("sacct") is None:
        return job
    done = _run(
        ["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={job.job_id}", "-o", _SACCT_FIELDS],
        what="",
    )
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        values = line.split("|")
        if len(values) == 7 and values[0] == job.job_id:
            exit_code, _, signum = values[2].partition(":")
            job.state = values[1].split()[0]
            job.node, job.submitted, job.started, job.ended = map(_clean, values[3:7])
            job.exit_code = int(exit_code) if exit_code.isdigit() else None
            job.signal = int(signum) if signum.isdigit() else 0
    return job


def cancel(job_ids: Iterable[str]) -> None:
    """``scancel`` the jobs: Slurm sends SIGTERM to each job's processes, SIGKILL after
    its KillWait, so iket inside a job stops its capture and keeps the evidence."""
    ids = list(job_ids)
    if ids:
        _run(["scancel", *ids], what="")


def options(table: Mapping[str, Any]) -> list[str]:
    """sbatch arguments from a ``[slurm]`` table (iket.toml; docs/ci.md, ``iket run``)."""
    words = []
    for key, flag in (
        ("partition", "--partition"),
        ("account", "--account"),
        ("qos", "--qos"),
        ("constraint", "--constraint"),
        ("mem", "--mem"),
        ("cpus", "--cpus-per-task"),
    ):
        if table.get(key) not in (None, ""):
            words.append(f"{flag}={table[key]}")
    if table.get("time") not in (None, ""):
        words.append(f"--time={table['time']}")  # a number is minutes, as sbatch reads it
    gpus = table.get("gpus", 1)
    if gpus:
        words.append(f"--gres=gpu:{gpus}")  # gres, not --gpus: older Slurm and cons_res know it
    return [*words, *table.get("extra", [])]


def cluster_answer(env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether the cluster answers (``sinfo``): for ``iket doctor`` and the tests."""
    missing = missing_tools(env)
    if missing:
        return False, f"not on PATH: {', '.join(missing)}"
    try:
        done = spawn.run(["sinfo", "--noheader", "-o", "%P %a %D %t"], env=env, timeout=15)
    except ToolchainError as error:
        return False, error.message
    if done.returncode != 0:
        return False, f"sinfo: {done.last_line()}"
    partitions = [line.split() for line in done.stdout.splitlines() if line.strip()]
    listed = ", ".join(f"{p[0]} ({p[2]} node(s) {p[3]})" for p in partitions[:4] if len(p) == 4)
    return True, f"the cluster answers: {listed or 'no partition listed'}"
