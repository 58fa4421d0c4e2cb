"""A window's end: its trace JSON finished like any capture's, or its evidence kept.

What :mod:`.window` saved in its staging folder becomes a capture: the Perfetto trace and its
gzip'd copy from the JSON (:mod:`.trace_exports`), lint and the HTML report (:mod:`.finish`),
the completeness record (the injection's log and the trace itself: no raw capture, no
tracker pass) and the manifest, whose ``window`` says where the window was and with what.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis import window_losses
from ..errors import CaptureError, IketError, Status
from ..model import artifacts, injection_log
from ..model import manifest as manifest_mod
from ..model import record as record_mod
from ..model import trace as trace_mod
from ..model.vocab import FORMATS
from ..system.machine import versions
from . import trace_exports
from .finish import finish
from .publish import missing_artifacts

if TYPE_CHECKING:
    from ..capture.staging import Staging


@dataclass(frozen=True)
class Closed:
    """What finishing a window needs to know of it, once its session has stopped."""

    staging: Staging
    number: int
    where: str
    started_at: datetime
    t0: float
    #: Seconds from the session's start to its stop (None: it never stopped).
    window_s: float | None
    formats: tuple[str, ...]
    log_level: str
    #: The settings the session applied (its budget among them); empty if it never started.
    applied: dict[str, Any] = field(default_factory=dict)
    #: This process's windows published before this one: ``{"number", "folder"}`` each.
    earlier: tuple[dict[str, Any], ...] = ()
    #: A window around calls of a function (``%%iket --function``, the pytest mark's): its
    #: ``function``, ``asked`` and held ``calls`` (``[first, last]``) and ``seen``; None otherwise.
    calls: dict[str, Any] | None = None


def finished(closed: Closed, trace: Path) -> dict[str, Any]:
    """Export, lint, report and write the manifest in the staging folder; the manifest."""
    capture = closed.staging.finalize()
    formats = closed.formats
    start = time.monotonic()
    trace_exports.compact(trace)
    loaded = trace_mod.load(trace)
    lines = _log_lines(capture)
    budget = closed.applied.get("max_ts_cnt_per_warp")
    found = window_losses.of_window(loaded, lines, closed.log_level, budget)
    short = window_losses.calls_short(closed.calls or {})
    if short is not None:  # the block ended before the last call asked for
        found.losses.append(short)
        found.checked.append("window")
    trace_exports.write(capture, formats, {trace.name: loaded})
    draft = _record(closed, Status.OK, artifacts.scan_processes(capture), found.to_dict())
    kept = frozenset({trace.name}) if "json" in formats else frozenset()
    try:  # the trace read once: judged, exported, linted and reported
        done = finish(capture, draft, formats, kept=kept, traces={trace.name: loaded})
    except IketError as error:
        raise CaptureError(f"the HTML report failed: {error.message}", phase="postprocess") from None
    missing = missing_artifacts(done.processes, formats)
    if missing:
        raise CaptureError(missing, phase="postprocess")
    record = _record(
        closed, Status.OK, done.processes, found.to_dict(), postprocess_s=time.monotonic() - start
    )
    if done.lint is not None:
        record["lint"] = done.lint
    manifest_mod.write(capture, record)
    return record


def evidence(closed: Closed, error: BaseException) -> None:
    """The manifest of a window whose block raised: what it saved, and the error."""
    capture = closed.staging.finalize()
    failure = error if isinstance(error, IketError) else CaptureError(
        f"the window's block raised {type(error).__name__}: {error}",
        phase="window",
        hint="the trace of what ran before it is kept here; fix the block and capture again",
    )  # fmt: skip
    status = Status.INTERRUPTED if isinstance(error, KeyboardInterrupt) else Status.FAILED
    manifest_mod.write(
        capture, _record(closed, status, artifacts.scan_processes(capture), None, error=failure)
    )


def died(output: Path, why: str) -> Path | None:
    """What a window's process left when it died inside the window (a crash in NVIDIA's session
    or in the workload; its staging folder beside DIR), kept as ``DIR.failed/`` with a manifest
    that says ``why``: the next run finds nothing to clean, the reader the injection's log. The
    evidence's folder, or None where the process left nothing."""
    from ..capture import outdir
    from ..capture.staging import TOKEN_BYTES, Staging, abandoned

    with outdir.Lock(output):
        left = abandoned(output)
        if left is None:
            return None
        staging = Staging(output, left, left.name[-2 * TOKEN_BYTES :])
        capture = staging.finalize()
        failure = CaptureError(why, phase="window", hint="the injection's own lines are in iket.log here")
        now = datetime.now(timezone.utc)
        where = "a process that died inside its window"
        closed = Closed(staging, 0, where, now, time.monotonic(), None, (), "info")
        manifest_mod.write(capture, _record(closed, Status.FAILED, artifacts.scan_processes(capture), None,
                                            error=failure))  # fmt: skip
        return staging.fail()


def _record(
    closed: Closed,
    status: str,
    processes: list[dict[str, Any]],
    completeness: dict[str, Any] | None,
    *,
    error: IketError | None = None,
    postprocess_s: float | None = None,
) -> dict[str, Any]:
    from ..system.toolchain import own_distribution

    finished_at = datetime.now(timezone.utc)
    return record_mod.build(
        status=status,
        target={"kind": "window", "spec": closed.where, "args": [], "display": f"window at {closed.where}"},
        cwd=str(Path.cwd()),
        started_at=closed.started_at,
        finished_at=finished_at,
        duration_s=round(time.monotonic() - closed.t0, 3),
        versions=versions(own_distribution()[0], []),
        postprocess=[f for f in FORMATS if f in closed.formats],
        processes=processes,
        keep=False,
        error=error,
        phases={
            "window": closed.window_s,
            "postprocess": None if postprocess_s is None else round(postprocess_s, 3),
        },
        completeness=completeness,
        window={
            "number": closed.number,
            "where": closed.where,
            "pid": os.getpid(),
            "earlier": list(closed.earlier),
            **(closed.calls or {}),
            **closed.applied,
            "skipped_modules": _skipped(closed),
        },
    )


def _skipped(closed: Closed) -> int:
    """CUDA modules the session could not inspect (its log says so of each)."""
    return injection_log.read_lines(_log_lines(closed.staging.capture_dir)).skipped_modules


def _log_lines(capture: Path) -> list[str]:
    from ..model.vocab import LOG_NAME

    try:
        return (capture / LOG_NAME).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
