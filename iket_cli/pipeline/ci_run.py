"""``iket run``'s whole command: the configuration's jobs run (or the one job a Slurm batch
script runs), the CI files written (JUnit, the markdown summary, ``$GITHUB_STEP_SUMMARY``),
a line per job, and the run's verdict counted: the click layer only parses the options."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import CaptureError
from ..model import atomic, outputs


def run(
    *,
    names: tuple[str, ...],
    config_path: Path | None,
    output: Path | None,
    postprocess: str | None,
    timeout: float | None,
    keep: bool | None,
    fail_fast: bool,
    workers: int | str | None,
    executor: str | None,
    rerun_failed: bool,
    job_result: Path | None,
    baseline: Path | None,
    fail_over: str,
    junit: Path | None,
    summary: Path | None,
    quiet: bool,
) -> int:
    """``iket run`` with its parsed options (``cli/run.py`` documents them): the exit status."""
    from dataclasses import asdict

    from ..analysis import diff as diff_mod
    from ..model.vocab import JOB_FAILING, RUN_MANIFEST_NAME
    from ..render import ci
    from ..render.progress import PrefixReporter
    from ..render.queue import QueueWatcher
    from . import config as config_mod
    from . import jobs as jobs_mod

    cfg = config_mod.load(config_path)
    jobs = cfg.select(list(names))
    overrides = {"postprocess": postprocess, "timeout": timeout, "keep": keep}
    root = outputs.check_folder(output or cfg.output, what="output root")
    _check_ci_files(junit, summary, [cfg.path, *([baseline] if baseline else [])])
    if job_result is not None:  # inside a Slurm allocation: one job, its result for the submitter
        return _one_job(cfg, jobs, root, overrides, job_result, quiet)
    if baseline is not None:
        diff_mod.parse_thresholds(fail_over)  # a bad threshold is a usage error before anything runs
    kept = None
    if rerun_failed:
        jobs, kept = jobs_mod.rerun_selection(root, jobs)
        if not jobs:
            sys.stderr.write(f"iket: nothing to rerun: no job of the last run over {root} failed\n")
            return 0
    kind = executor or cfg.executor
    results = jobs_mod.run(
        cfg,
        jobs,
        root=root,
        executor=jobs_mod.executor_for(
            kind,
            cfg,
            root,
            overrides,
            workers=workers,
            reporter_for=lambda name: PrefixReporter(name, quiet),
            watcher=QueueWatcher(quiet) if kind == "slurm" else None,
        ),
        fail_fast=fail_fast,
        baseline=baseline,
        fail_over=fail_over if baseline else None,
        kept=kept,
    )
    records = [asdict(r) for r in results]
    _check_ci_files(junit, summary, [cfg.path])  # again: a job may have made a capture there
    if junit:
        atomic.write(junit, ci.junit(records))
    text = ci.summary_markdown(records, root)
    if summary:
        atomic.write(summary, text)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as handle:
            handle.write(text)
    ran = {job.name for job in jobs}
    if kept and not quiet:
        sys.stderr.write(f"iket: {len(results) - len(ran)} job(s) kept as the last run left them\n")
    for r in results:
        if r.name in ran and (not quiet or r.status in JOB_FAILING):
            sys.stderr.write(
                f"iket: {r.name}: {r.status} in {r.duration_s:.1f} s{f' ({r.error})' if r.error else ''}\n"
            )
    failed = [r for r in results if r.status in JOB_FAILING]
    cancelled = sum(1 for r in failed if r.status == "cancelled")
    skipped = len(ran - {r.name for r in results})
    if failed or skipped:
        raise CaptureError(
            f"{len(failed) - cancelled} of {len(results) + skipped} job(s) failed"
            f"{f', {cancelled} cancelled' if cancelled else ''}"
            f"{f', {skipped} not started (--fail-fast)' if skipped else ''}; "
            f"see {root / RUN_MANIFEST_NAME}",
            phase="run",
        )
    return 0


def _check_ci_files(junit: Path | None, summary: Path | None, reads: list[Path]) -> None:
    """The CI files may not overwrite what the run reads or a capture's own files."""
    for path, what in ((junit, "JUnit file"), (summary, "summary")):
        if path is not None:
            outputs.check_file(path, reads, what=what)


def _one_job(cfg, jobs, root: Path, overrides: dict, result_path: Path, quiet: bool) -> int:
    """``iket run --job-result FILE NAME``: what a Slurm batch script runs on its node."""
    from ..errors import UsageError
    from ..render.progress import PrefixReporter
    from .job import run_for_submitter

    if len(jobs) != 1:
        raise UsageError("--job-result takes exactly one job name")
    return run_for_submitter(cfg, jobs[0], root, overrides, result_path, PrefixReporter(jobs[0].name, quiet))
