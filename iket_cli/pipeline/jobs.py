"""``iket run``: every configured job through ``iket profile``'s rules, for CI.

Each job is captured into ``<output root>/<name>/`` (staging, atomic publish, failure
directory: the rules of :mod:`iket_cli.pipeline.profile`; the root belongs to ``iket run``,
so a job's previous capture there is replaced once the new one succeeds). An executor
(:mod:`.executors`: ``local``, pinned to this host's GPUs; :mod:`.slurm`: one Slurm job each)
runs them; this module gates each result on a baseline, stops on the first failure with
``--fail-fast``, picks the jobs ``--rerun-failed`` runs again, and writes the outcome to
``<output root>/run-manifest.json``; JUnit XML and a markdown summary are rendered from the
same records (:mod:`iket_cli.render.ci`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..analysis import diff as diff_mod
from ..analysis import gate, judged
from ..errors import CaptureInterrupted, UsageError
from ..model import atomic, jsonio
from ..model.reading import open_capture
from ..model.vocab import GATE_STATUSES, JOB_FAILING, MANIFEST_NAME, RUN_MANIFEST_NAME
from .config import Config, Job
from .executors import Executor, LocalExecutor, RunStopped
from .job import JobResult

SCHEMA_VERSION = 1


def executor_for(
    name: str,
    config: Config,
    root: Path,
    overrides: dict[str, Any],
    *,
    workers=None,
    reporter_for=None,
    watcher=None,
) -> Executor:
    """The executor called ``name`` (``local`` or ``slurm``) for a run into ``root``."""
    if name == "slurm":
        from .slurm import SlurmExecutor

        limit = None if workers in (None, "auto") else int(workers)
        return SlurmExecutor(config, root, overrides, limit=limit, watcher=watcher)
    return LocalExecutor(config, root, overrides, workers=workers, reporter_for=reporter_for)


def run(
    config: Config,
    jobs: list[Job],
    *,
    root: Path,
    executor: Executor,
    fail_fast: bool = False,
    baseline: Path | None = None,
    fail_over: str | None = None,
    kept: list[JobResult] | None = None,
) -> list[JobResult]:
    """Run ``jobs`` on ``executor``; never raises for a job's failure (``JobResult.status``).

    ``kept`` are earlier results that stay in the run manifest (``--rerun-failed`` runs
    only the failed jobs again). Ctrl-C or SIGTERM stop the executor's jobs; the run
    manifest is still written, and :class:`~iket_cli.errors.CaptureInterrupted` raised.
    """
    baseline_root = _baseline_root(baseline)
    order = {job.name: number for number, job in enumerate(jobs)}

    def finished(result: JobResult) -> bool:
        if result.status in GATE_STATUSES and baseline_root is not None:
            _gate(result, baseline_root / result.name, root / result.name, fail_over)
        return fail_fast and result.status in JOB_FAILING

    started = datetime.now(timezone.utc)
    gate = None if baseline_root is None else {"baseline": str(baseline_root), "fail_over": fail_over}
    try:
        results = executor.execute(jobs, finished)
    except RunStopped as stopped:
        ordered = _merged(kept, sorted(stopped.results, key=lambda r: order[r.name]))
        write_manifest(root, ordered, started, gate, executor.name)
        raise CaptureInterrupted.by(
            stopped.signum, f": {stopped.what}; see {root / RUN_MANIFEST_NAME}", phase="run"
        ) from None
    results = _merged(kept, sorted(results, key=lambda r: order[r.name]))
    write_manifest(root, results, started, gate, executor.name)
    return results


def _merged(kept: list[JobResult] | None, new: list[JobResult]) -> list[JobResult]:
    """Earlier results with the new ones in their places (new jobs at the end)."""
    if not kept:
        return new
    fresh = {r.name: r for r in new}
    merged = [fresh.pop(r.name, r) for r in kept]
    return merged + list(fresh.values())


def rerun_selection(root: Path, jobs: list[Job]) -> tuple[list[Job], list[JobResult]]:
    """(the jobs the last run over ``root`` failed, every result of that run) for ``--rerun-failed``."""
    path = root / RUN_MANIFEST_NAME
    try:
        record = jsonio.parse(path.read_text(encoding="utf-8"))
        previous = [JobResult(**job) for job in record["jobs"]]
    except FileNotFoundError:
        raise UsageError(
            f"--rerun-failed: no earlier run in {root} ({RUN_MANIFEST_NAME} is missing)",
            hint="run iket run without --rerun-failed first",
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"--rerun-failed: {path} is not a run manifest iket can read: {error}") from None
    failed = {r.name for r in previous if r.status in JOB_FAILING}
    return [job for job in jobs if job.name in failed], previous


def _gate(result: JobResult, base: Path, new: Path, fail_over: str | None) -> None:
    if not (base / MANIFEST_NAME).is_file():
        result.error = f"no baseline capture at {base}"
        return
    sides = {"the baseline": open_capture(base), "this capture": open_capture(new)}
    changes = diff_mod.compare(sides["the baseline"], sides["this capture"], fail_over=fail_over)
    result.regressions = [asdict(c) for c in changes if c.regression]
    failed = gate.verdict(changes, fail_over, unmatched_fails=True)
    verdicts = {name: judged.judge(side) for name, side in sides.items()}
    lost = [f"{name} is {found.line}" for name, found in verdicts.items() if found.state == judged.INCOMPLETE]
    if lost:  # the gate cannot pass on numbers that miss what IKET lost
        result.status, result.exit_code = "regressed", 1
        result.error = "the gate cannot pass: " + "; ".join(lost)
    elif failed is not None:
        result.status, result.exit_code = "regressed", 1
        result.error = failed.message + (f" ({failed.hint})" if failed.hint else "")
    unknown = [f"{name}: {found.line}" for name, found in verdicts.items() if found.state == judged.UNKNOWN]
    if unknown and not lost:
        result.notes += unknown


def _baseline_root(baseline: Path | None) -> Path | None:
    if baseline is None:
        return None
    return baseline.parent if baseline.name == RUN_MANIFEST_NAME else baseline


def write_manifest(
    root: Path,
    results: list[JobResult],
    started: datetime,
    gate: dict[str, Any] | None = None,
    executor: str = "local",
) -> Path:
    """``run-manifest.json``; ``gate`` (``baseline``, ``fail_over``) says what the jobs were gated on."""
    root.mkdir(parents=True, exist_ok=True)
    record = {
        "schema_version": SCHEMA_VERSION,
        "started_at": started.isoformat(timespec="milliseconds"),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "status": "failed" if any(r.status in JOB_FAILING for r in results) else "ok",
        "executor": executor,
        "gate": gate,
        "jobs": [asdict(r) for r in results],
    }
    return atomic.write(root / RUN_MANIFEST_NAME, json.dumps(record, indent=2) + "\n")
