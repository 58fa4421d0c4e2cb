"""``iket profile``: one capture, start to end, as a few steps over a resolved plan.

    resolve (capture/plan) → lock + staging (capture/outdir) → the passes (capture/passes)
    → decode (decode/pool) → --overhead run → drift (analysis/drift) → lint + report
    (pipeline/finish) → manifest (model/record) → publish, or the evidence in DIR.failed/

Every step reads the frozen :class:`~iket_cli.capture.plan.Plan` and returns what it
found; this module only sequences them and decides, from what they returned, whether the
capture is published or its evidence kept. An existing output directory is never changed
unless the new capture succeeded (and then only with ``clobber=True``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..analysis import drift
from ..analysis import overhead as overhead_mod
from ..capture import outdir, passes, runiket, spawn, sysinfo
from ..capture.events import Reporter
from ..capture.passes import PassResult, Transcript
from ..capture.plan import Options, Plan, coerce_target, resolve
from ..capture.targets import Target
from ..decode import export, pool
from ..decode import tasks as decode_tasks
from ..decode.tasks import Outcome
from ..errors import CaptureError, CaptureInterrupted, CaptureTimeout, DecodeError, IketError
from ..model import artifacts, labels
from ..model import manifest as manifest_mod
from ..model import record as record_mod
from ..model.folder import Capture
from ..model.vocab import (
    INTERMEDIATES,
    LOG_NAME,
    OVERHEAD_DIR,
    PROCS_NAME,
    STATS_NAME,
    artifacts_for,
    formats_for,
)
from .finish import finish


def profile(
    target_or_argv: str | os.PathLike | Sequence[str] | Target,
    output_dir: str | os.PathLike | None = None,
    *,
    postprocess: str = "all",
    clobber: bool = False,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    reporter: Reporter | None = None,
    **options: Any,
) -> Capture:
    """Capture an IKET timeline of a script, a function, a module or any command.

    ``target_or_argv`` is ``"script.py"``, ``"script.py:func"``, ``"pkg.module:func"``, a
    :class:`~iket_cli.capture.targets.Target`, or a command as a list (``["torchrun", ...]``).
    Further keyword options are the fields of :class:`~iket_cli.capture.plan.Options`
    (``keep``, ``python``, ``run_iket``, ``max_ts_cnt_per_warp``, ``warp_trace``, ...).
    Raises a subclass of :class:`~iket_cli.errors.IketError` on any failure.
    """
    opts = Options(
        postprocess=postprocess,
        clobber=clobber,
        timeout=timeout,
        env=dict(env or {}),
        cwd=Path(cwd) if cwd is not None else None,
        **options,
    )
    plan = resolve(coerce_target(target_or_argv), output_dir, opts)
    return run(plan, reporter or Reporter())


def run(plan: Plan, reporter: Reporter) -> Capture:
    """Capture ``plan`` into its output directory, holding the directory's lock throughout."""
    with outdir.Lock(plan.output_dir), outdir.Staging(plan.output_dir) as staging:
        return _attempt(plan, staging, reporter)


@dataclass(frozen=True)
class _Facts:
    """What an attempt has learned so far: each step's result. The manifest is built from it."""

    started: datetime
    t0: float
    run_iket_argv: list[str]
    gpus: sysinfo.GpuQuery
    passes: PassResult | None = None
    postprocess_s: float | None = None
    overhead: dict[str, Any] | None = None
    drift: list[str] = field(default_factory=list)


def _attempt(plan: Plan, staging: outdir.Staging, reporter: Reporter) -> Capture:
    facts = _Facts(
        datetime.now(timezone.utc),
        time.monotonic(),
        runiket.profile_argv(plan, staging.capture_dir),
        sysinfo.GpuQuery(),
    )
    formats = formats_for(plan.options.postprocess)
    if formats:  # load the decoder while the passes run, not after them
        threading.Thread(target=export.preload, daemon=True).start()
    deadline = None if plan.options.timeout is None else facts.t0 + plan.options.timeout
    try:
        with _transcript(staging, plan, facts.run_iket_argv, reporter) as transcript:
            ran = passes.capture(plan, staging, transcript, deadline=deadline)
            facts = replace(facts, passes=ran)
            failure = ran.failure()
            if failure is not None:
                raise failure
            facts = replace(facts, postprocess_s=_decode(staging, transcript, formats))
            if plan.options.overhead:
                facts = replace(facts, overhead=_overhead(plan, staging, transcript, deadline))
            facts = replace(facts, drift=_drift(staging, transcript))
    except IketError as error:
        raise _keep_evidence(plan, staging, facts, error) from None
    return _publish(plan, staging, facts, formats, reporter)


@contextlib.contextmanager
def _transcript(
    staging: outdir.Staging, plan: Plan, argv: list[str], reporter: Reporter
) -> Iterator[Transcript]:
    """The attempt's ``iket.log``, opened and closed here, and nowhere else."""
    with open(staging.log_path, "w", encoding="utf-8", errors="replace") as log:
        transcript = Transcript(log, reporter)
        transcript.note(" ".join(plan.options.command or ["iket_cli.profile(...)"]))
        transcript.note(f"run-iket command: {spawn.quote(argv)}")
        yield transcript


class _LoggedProgress(pool.Progress):
    """Decode progress as ``[iket]`` lines: in the log, and on the console with -v."""

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript

    def finished(self, outcome: Outcome) -> None:
        task = outcome.task
        verdict = f"failed: {outcome.error}" if outcome.error else f"in {outcome.seconds:.2f} s"
        self.transcript.line(f"[iket] decoded pid {task.pid_hex} {task.export} {verdict}")


def _decode(staging: outdir.Staging, transcript: Transcript, formats: list[str]) -> float | None:
    """Decode every process's raw capture into ``formats``, in parallel; the seconds it took."""
    tasks = decode_tasks.plan(staging.capture_dir, formats)
    if not tasks:
        return None  # nothing was captured: _missing_artifacts says so
    transcript.reporter.phase("postprocess")
    start = time.monotonic()
    outcomes = pool.run(tasks, progress=_LoggedProgress(transcript))
    errors = list(dict.fromkeys(o.error for o in outcomes if o.error))
    if errors:
        raise DecodeError(f"decoding failed: {errors[0]}", phase="postprocess", details=errors[1:])
    return round(time.monotonic() - start, 3)


def _overhead(
    plan: Plan, staging: outdir.Staging, transcript: Transcript, deadline: float | None
) -> dict[str, Any]:
    """Time the kernels once more without instrumentation; a failure here only warns.

    The capture itself is complete and valid by now, so a failed comparison run is
    recorded in the manifest (``overhead.error``) instead of failing the capture; only a
    timeout or an interrupt (which stop everything) fail it.
    """
    transcript.reporter.phase("overhead")
    ran = passes.plain(plan, staging, transcript, deadline=deadline)
    if isinstance(ran.error, (CaptureTimeout, CaptureInterrupted)):
        raise ran.error
    plain = staging.root / OVERHEAD_DIR
    record: dict[str, Any] = {"run_iket_s": round(ran.duration_s, 3), "kernels": [], "error": None}
    if ran.returncode != 0:
        tail = [line for line in ran.tail if not runiket.is_noise(line)][-1:]
        record["error"] = f"the --warp-trace run failed with status {ran.returncode}: {' '.join(tail)}"
    else:
        try:
            record["kernels"] = overhead_mod.measure(staging.capture_dir, plain)
        except IketError as error:
            record["error"] = f"could not read the --warp-trace run's traces: {error.message}"
        if not record["kernels"] and record["error"] is None:
            record["error"] = "the --warp-trace run recorded none of the instrumented kernels"
    if record["error"]:
        transcript.reporter.warn(f"--overhead: {record['error']}", f"the run's output is in {LOG_NAME}")
    if plan.options.keep and plain.is_dir():
        os.replace(plain, staging.capture_dir / OVERHEAD_DIR)
    return record


def _drift(staging: outdir.Staging, transcript: Transcript) -> list[str]:
    """What differs between the passes (needs the intermediates: before they go)."""
    drifted = drift.check(staging.capture_dir)
    for problem in drifted:
        transcript.log.write(f"[iket] pass drift: {problem}\n")
    return drifted


def _publish(
    plan: Plan, staging: outdir.Staging, facts: _Facts, formats: list[str], reporter: Reporter
) -> Capture:
    """Lint and report, check every artifact is there, write the manifest, publish."""
    reporter.phase("publish")
    capture = staging.finalize()
    processes = artifacts.scan_processes(capture)
    start = time.monotonic()
    try:
        finished = finish(capture, _manifest(plan, staging, facts, "ok", processes), formats)
    except IketError as error:
        failure = CaptureError(f"the HTML report failed: {error.message}", phase="postprocess")
        raise _keep_evidence(plan, staging, facts, failure) from None
    if "html" in formats:  # the reports count as postprocessing
        facts = replace(facts, postprocess_s=round((facts.postprocess_s or 0) + time.monotonic() - start, 3))
    processes = finished.processes
    missing = _missing_artifacts(processes, formats)
    if missing:
        raise _keep_evidence(plan, staging, facts, CaptureError(missing, phase="postprocess"))
    if not plan.options.keep:
        for name in INTERMEDIATES:
            shutil.rmtree(capture / name, ignore_errors=True)
        for process in processes:
            process["raw"] = None
    status = "suspect" if facts.drift else "ok"
    lint = finished.lint or []
    record = _manifest(plan, staging, facts, status, processes, drift=facts.drift, lint=lint)
    for finding in lint:
        reporter.warn(f"pid {finding['process']}: [{finding['code']}] {finding['message']}", finding["hint"])
    manifest_mod.write(capture, record)
    published = staging.publish()
    result = Capture(published, record)
    if facts.drift:
        reporter.warn(f"the passes differ, the capture is suspect: {facts.drift[0]}", runiket.DRIFT_HINT)
        if plan.options.strict:
            raise CaptureError(
                f"the tracker and capture passes differ ({len(facts.drift)} difference(s)): {facts.drift[0]}",
                phase="capture",
                hint=f"{runiket.DRIFT_HINT}; the capture is in {published}, marked suspect",
                details=facts.drift[1:],
            )
    return result


def _missing_artifacts(processes: list[dict[str, Any]], formats: list[str]) -> str | None:
    kinds = artifacts_for(formats)
    if not kinds:
        return None
    if not processes:
        return "the capture pass produced no trace: no process ran an instrumented kernel"
    for process in processes:
        for kind in kinds:
            if kind not in process["artifacts"]:
                return f"run-iket wrote no {kind} for process {process['pid_hex']}"
    return None


def _keep_evidence(plan: Plan, staging: outdir.Staging, facts: _Facts, error: IketError) -> IketError:
    """Keep the attempt's evidence in DIR.failed/ and return ``error`` pointing at it."""
    capture = staging.finalize()
    try:
        processes = artifacts.scan_processes(capture)
    except OSError:
        processes = []
    manifest_mod.write(capture, _manifest(plan, staging, facts, _status_of(error), processes, error=error))
    where = staging.fail()
    error.failed_dir = where
    note = f"evidence kept in {where}"
    error.hint = f"{error.hint}; {note}" if error.hint else note
    return error


def _status_of(error: IketError) -> str:
    if isinstance(error, CaptureTimeout):
        return "timeout"
    return "interrupted" if isinstance(error, CaptureInterrupted) else "failed"


def _manifest(
    plan: Plan,
    staging: outdir.Staging,
    facts: _Facts,
    status: str,
    processes: list[dict[str, Any]],
    error: IketError | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The manifest of this attempt as it stands (labels attached to ``processes``)."""
    labels.attach(processes, staging.root / PROCS_NAME)
    ran = facts.passes
    buffer = ran.device_buffer if ran else None
    return record_mod.build(
        status=status,
        error=error,
        target={**plan.target.to_dict(), "display": plan.target.describe()},
        command=plan.options.command,
        argv=plan.workload_argv,
        run_iket_argv=facts.run_iket_argv,
        cwd=str(plan.cwd),
        started_at=facts.started,
        finished_at=datetime.now(timezone.utc),
        duration_s=round(time.monotonic() - facts.t0, 3),
        phases={
            **artifacts.phases_from_stats(staging.capture_dir / STATS_NAME),
            "postprocess": facts.postprocess_s,
            "run_iket": round(ran.duration_s, 3) if ran and ran.error is None else None,
            "overhead": None if facts.overhead is None else facts.overhead["run_iket_s"],
        },
        versions=sysinfo.versions(plan.tool.version, facts.gpus.result()),
        postprocess=formats_for(plan.options.postprocess),
        keep=plan.options.keep,
        trace_budget={
            "device_buffer_bytes": buffer,
            "max_buffer_bytes": plan.options.max_buffer,
            "estimated_json_bytes_max": None if buffer is None else buffer * runiket.JSON_PER_RAW_BYTE,
        },
        overhead=facts.overhead,
        warm=ran.warm if ran else None,
        processes=processes,
        **extra,
    )
