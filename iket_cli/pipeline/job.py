"""One job of ``iket run``: captured by ``iket profile``'s rules, its outcome a :class:`JobResult`.

Every executor ends here: the local one calls :func:`run_job` in a thread per job; a Slurm
job runs ``iket run --job-result FILE NAME`` on its node, which calls :func:`run_job` there
and writes the result as JSON for the submitting ``iket run`` to read. So a job's record
is the same whichever executor ran it; Slurm's view of it is added beside (``slurm``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..capture import targets
from ..errors import IketError, IncompleteCapture, Status
from ..model import atomic, jsonio
from ..model import manifest as manifest_mod
from ..model.completeness import headline
from ..model.units import parse_size
from ..model.vocab import INCOMPLETE, JOB_FAILING, LOG_NAME, MANIFEST_NAME
from . import profile as profile_mod
from .config import Config, Job


@dataclass
class JobResult:
    name: str
    status: str
    duration_s: float
    output_dir: str
    manifest: str | None
    error: str | None = None
    exit_code: int = 0
    gpu: str | None = None
    regressions: list[dict] = field(default_factory=list)
    log_tail: list[str] = field(default_factory=list)
    #: What the gate could not judge (a side with no completeness record whose traces cannot tell).
    notes: list[str] = field(default_factory=list)
    #: With ``--executor slurm``: the job's Slurm id, state, node, queue and run times, log.
    slurm: dict[str, Any] | None = None

    @classmethod
    def load(cls, path: Path) -> JobResult | None:
        """A result written by :func:`write` (None if absent or unreadable: the job died first)."""
        try:
            data = jsonio.parse(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known}) if isinstance(data, dict) else None

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(path, json.dumps(asdict(self), indent=2) + "\n")


def run_job(
    config: Config,
    job: Job,
    root: Path,
    overrides: dict,
    gpu: str | None,
    reporter=None,
    cancel: threading.Event | None = None,
) -> JobResult:
    """Capture ``job`` into ``root/<name>``; never raises for the job's own failure.

    ``gpu`` pins the job to that GPU (``CUDA_VISIBLE_DEVICES``); None leaves the variable
    as the caller's environment has it (a Slurm allocation sets it to the job's GPUs).
    """
    options = {**config.defaults, **job.options, **{k: v for k, v in overrides.items() if v is not None}}
    env = {**config.defaults.get("env", {}), **job.options.get("env", {})}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    options["env"] = env
    options.pop("slurm", None)
    if isinstance(options.get("max_buffer"), str):
        options["max_buffer"] = parse_size(options["max_buffer"])
    for key in ("enabled_cluster_config", "roles"):  # paths relative to the configuration
        if key in options:
            options[key] = config.path.parent / options[key]
    out = root / job.name
    seen_gpu = gpu if gpu is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    start = time.monotonic()
    try:
        target = targets.parse(*job.words())
        record = profile_mod.profile(
            target,
            out,
            clobber=True,
            cwd=job.cwd or config.path.parent,
            reporter=reporter,
            command=["iket", "run", job.name],
            cancel=cancel,
            **options,
        ).manifest
    except IncompleteCapture:  # --strict: published, and incomplete
        return _published(job.name, manifest_mod.read(out), root, out, start, seen_gpu)
    except IketError as error:
        failed = error.failed_dir
        manifest = failed / MANIFEST_NAME if failed and (failed / MANIFEST_NAME).is_file() else None
        return JobResult(
            job.name,
            _status(error),
            round(time.monotonic() - start, 3),
            rel(failed or out, root),
            rel(manifest, root),
            error.message,
            int(error.exit_code),
            seen_gpu,
            log_tail=tail(failed / LOG_NAME if failed else None),
        )
    return _published(job.name, record, root, out, start, seen_gpu)


def _published(name: str, record: dict, root: Path, out: Path, start: float, gpu: str | None) -> JobResult:
    """A job whose capture was published: its status, ``incomplete`` (exit 1, the first loss
    its error) where IKET lost some of its data."""
    lost = headline(record)
    return JobResult(
        name,
        INCOMPLETE if lost else record["status"],
        round(time.monotonic() - start, 3),
        rel(out, root),
        rel(out / MANIFEST_NAME, root),
        lost,
        1 if lost else 0,
        gpu,
    )


def run_for_submitter(
    config: Config, job: Job, root: Path, overrides: dict, result_path: Path, reporter
) -> int:
    """Run ``job`` into ``root`` and write its result to ``result_path`` for the ``iket run``
    that submitted it (a Slurm batch script's one command); the exit status is Slurm's verdict."""
    result = run_job(config, job, root, overrides, None, reporter)
    result.write(result_path)
    sys.stderr.write(f"iket: {job.name}: {result.status}{f' ({result.error})' if result.error else ''}\n")
    return 1 if result.status in JOB_FAILING else 0


def _status(error: IketError) -> str:
    if error.manifest_status != Status.FAILED:  # timeout, interrupted
        return error.manifest_status
    return Status.FAILED if error.failed_dir else "error"


def rel(path: Path | None, root: Path) -> str | None:
    """``path`` as the run manifest records it: relative to the output root where it is inside."""
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def tail(log: Path | None, lines: int = 40) -> list[str]:
    """The last lines of a log, for the run manifest and JUnit (empty when there is none)."""
    if log is None or not log.is_file():
        return []
    return log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
