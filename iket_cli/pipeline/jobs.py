"""``iket run``: every configured job through ``iket profile``'s rules, for CI.

Each job is captured into ``<output root>/<name>/`` (staging, atomic publish, failure
directory: the rules of :mod:`iket_cli.pipeline.profile`; the root belongs to ``iket run``,
so a job's previous capture there is replaced once the new one succeeds). Jobs run one at a
time or concurrently, each pinned to a GPU of its own through ``CUDA_VISIBLE_DEVICES``.
The outcome is written to ``<output root>/run-manifest.json``; JUnit XML and a markdown
summary are rendered from the same records (:mod:`iket_cli.render.ci`).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..analysis import diff as diff_mod
from ..capture import sysinfo, targets
from ..capture.runner import sigterm_as_exception, wait_all
from ..errors import CaptureInterrupted, CaptureTimeout, IketError, Terminated, signal_of
from ..model.units import parse_size
from ..model.vocab import JOB_FAILING, LOG_NAME, MANIFEST_NAME, RUN_MANIFEST_NAME
from . import profile as profile_mod
from .config import Config, Job

SCHEMA_VERSION = 1


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


def gpu_slots() -> list[str]:
    """GPU indices for pinning: ``$IKET_GPUS`` (comma list) or what nvidia-smi lists."""
    override = os.environ.get("IKET_GPUS")
    if override is not None:
        return [g.strip() for g in override.split(",") if g.strip()]
    return [gpu["index"] for gpu in sysinfo.query_gpus()]


def run(
    config: Config,
    jobs: list[Job],
    *,
    overrides: dict[str, Any],
    workers: int | str = 1,
    fail_fast: bool = False,
    baseline: Path | None = None,
    fail_over: str | None = None,
    reporter_for=None,
) -> list[JobResult]:
    """Run ``jobs``; never raises for a job's failure (see ``JobResult.status``).

    Ctrl-C or SIGTERM (which only this, the main thread, receives) cancel every running
    job's capture, whose trees are stopped and evidence kept; the run manifest is still
    written, and :class:`~iket_cli.errors.CaptureInterrupted` raised.
    """
    root = Path(overrides.get("output") or config.output)
    overrides = {k: v for k, v in overrides.items() if k != "output"}
    slots = gpu_slots()
    count = (len(slots) or 1) if workers == "auto" else int(workers)
    free: queue.Queue[str | None] = queue.Queue()
    for slot in (slots or [None]) * (1 if slots else count):
        free.put(slot)
    stop, cancel = threading.Event(), threading.Event()
    baseline_root = _baseline_root(baseline)

    def one(job: Job) -> JobResult | None:
        if stop.is_set() or cancel.is_set():
            return None
        gpu = free.get()
        try:
            result = _run_job(config, job, root, overrides, gpu, reporter_for, cancel)
            # a partial repeated capture is gated on the repeats it has (analysis.gate says
            # when they are too few); a suspect one (the passes drifted) is not
            if result.status in ("ok", "partial") and baseline_root is not None:
                _gate(result, baseline_root / job.name, root / job.name, fail_over)
        finally:
            free.put(gpu)
        if fail_fast and result.status in JOB_FAILING:
            stop.set()
        return result

    started = datetime.now(timezone.utc)
    gate = None if baseline_root is None else {"baseline": str(baseline_root), "fail_over": fail_over}
    pool = ThreadPoolExecutor(max_workers=max(1, count))
    futures = [pool.submit(one, job) for job in jobs]
    try:
        with sigterm_as_exception():
            wait_all(futures)
    except (KeyboardInterrupt, Terminated) as signalled:
        cancel.set()
        pool.shutdown(wait=True)
        results = [r for f in futures if not f.cancelled() and (r := f.result()) is not None]
        write_manifest(root, results, started, gate)
        raise CaptureInterrupted.by(
            signal_of(signalled),
            f": {len(jobs) - len(results)} job(s) not run, the running ones stopped; "
            f"see {root / RUN_MANIFEST_NAME}",
            phase="run",
        ) from None
    finally:
        pool.shutdown(wait=True)
    results = [r for f in futures if (r := f.result()) is not None]
    write_manifest(root, results, started, gate)
    return results


def _run_job(
    config: Config,
    job: Job,
    root: Path,
    overrides: dict,
    gpu: str | None,
    reporter_for,
    cancel: threading.Event | None = None,
) -> JobResult:
    options = {**config.defaults, **job.options, **{k: v for k, v in overrides.items() if v is not None}}
    env = {**config.defaults.get("env", {}), **job.options.get("env", {})}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    options["env"] = env
    if isinstance(options.get("max_buffer"), str):
        options["max_buffer"] = parse_size(options["max_buffer"])
    for key in ("enabled_cluster_config", "roles"):  # paths relative to the configuration
        if key in options:
            options[key] = config.path.parent / options[key]
    out = root / job.name
    start = time.monotonic()
    try:
        target = targets.parse(*job.words())
        record = profile_mod.profile(
            target,
            out,
            clobber=True,
            cwd=job.cwd or config.path.parent,
            reporter=reporter_for(job.name) if reporter_for else None,
            command=["iket", "run", job.name],
            cancel=cancel,
            **options,
        ).manifest
    except IketError as error:
        failed = error.failed_dir
        manifest = failed / MANIFEST_NAME if failed and (failed / MANIFEST_NAME).is_file() else None
        return JobResult(
            job.name,
            _status(error),
            round(time.monotonic() - start, 3),
            _rel(failed or out, root),
            _rel(manifest, root),
            error.message,
            int(error.exit_code),
            gpu,
            log_tail=_tail(failed / LOG_NAME if failed else None),
        )
    return JobResult(
        job.name,
        record["status"],
        round(time.monotonic() - start, 3),
        _rel(out, root),
        _rel(out / MANIFEST_NAME, root),
        None,
        0,
        gpu,
    )


def _status(error: IketError) -> str:
    if isinstance(error, CaptureTimeout):
        return "timeout"
    if isinstance(error, CaptureInterrupted):
        return "interrupted"
    return "failed" if error.failed_dir else "error"


def _gate(result: JobResult, base: Path, new: Path, fail_over: str | None) -> None:
    if not (base / MANIFEST_NAME).is_file():
        result.error = f"no baseline capture at {base}"
        return
    changes = diff_mod.compare(base, new, fail_over=fail_over)
    result.regressions = [asdict(c) for c in changes if c.regression]
    unsure = diff_mod.undecided(changes)
    if unsure and not result.regressions:
        result.status, result.exit_code = "regressed", 1
        result.error = (
            f"not enough repeats to decide: {len(unsure)} range(s) over --fail-over {fail_over} with "
            f"{unsure[0].repeats[0]} repeat(s) of the baseline and {unsure[0].repeats[1]} now "
            "(the rank test needs 3 against 3: repeat = 3 or more)"
        )
        return
    missing = diff_mod.unmatched(changes)
    if missing and not result.regressions:
        result.status = "regressed"
        result.exit_code = 1
        result.error = (
            f"{len(missing)} range(s) of the baseline have no match, so the gate cannot judge them: "
            f"{', '.join(f'{c.name or c.kernel} / {c.range}' for c in missing[:3])}"
        )
        return
    if result.regressions:
        worst = result.regressions[0]
        result.status = "regressed"
        result.exit_code = 1
        result.error = (
            f"{len(result.regressions)} range(s) slower than --fail-over {fail_over}: worst "
            f"{worst.get('name') or worst['kernel']} / {worst['range']} {worst['ratio']:.3f}x"
        )


def _baseline_root(baseline: Path | None) -> Path | None:
    if baseline is None:
        return None
    return baseline.parent if baseline.name == RUN_MANIFEST_NAME else baseline


def _rel(path: Path | None, root: Path) -> str | None:
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _tail(log: Path | None, lines: int = 40) -> list[str]:
    if log is None or not log.is_file():
        return []
    return log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]


def write_manifest(
    root: Path, results: list[JobResult], started: datetime, gate: dict[str, Any] | None = None
) -> Path:
    """``run-manifest.json``; ``gate`` (``baseline``, ``fail_over``) says what the jobs were gated on."""
    root.mkdir(parents=True, exist_ok=True)
    record = {
        "schema_version": SCHEMA_VERSION,
        "started_at": started.isoformat(timespec="milliseconds"),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "status": "failed" if any(r.status in JOB_FAILING for r in results) else "ok",
        "gate": gate,
        "jobs": [asdict(r) for r in results],
    }
    path = root / RUN_MANIFEST_NAME
    tmp = path.with_name(f".{RUN_MANIFEST_NAME}.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, path)
    return path
