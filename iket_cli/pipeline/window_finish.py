"""A window's end: its trace JSON finished like any capture's, or its evidence kept.

What :mod:`.window` saved in its staging folder becomes a capture: the Perfetto trace and its
gzip'd copy from the JSON (:mod:`.trace_exports`), lint and the HTML report (:mod:`.finish`),
the completeness record (the injection's log and the trace itself: no raw capture, no
tracker pass) and the manifest, whose ``window`` says where the window was and with what.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis import completeness as judge
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
    from .window import _Open


def finished(opened: _Open, trace: Path) -> dict[str, Any]:
    """Export, lint, report and write the manifest in the staging folder; the manifest."""
    staging = opened.staging
    assert staging is not None
    capture = staging.finalize()
    formats = opened.owner.formats
    start = time.monotonic()
    trace_exports.compact(trace)
    loaded = trace_mod.load(trace)
    lines = _log_lines(capture)
    budget = (opened.session.applied if opened.session else {}).get("max_ts_cnt_per_warp")
    found = judge.of_window(loaded, lines, opened.owner.settings.log_level, budget)
    opened.skipped = injection_log.read_lines(lines).skipped_modules
    del loaded
    trace_exports.write(capture, formats)
    draft = _record(opened, Status.OK, artifacts.scan_processes(capture), found.to_dict())
    try:
        done = finish(
            capture, draft, formats, kept=frozenset({trace.name}) if "json" in formats else frozenset()
        )
    except IketError as error:
        raise CaptureError(f"the HTML report failed: {error.message}", phase="postprocess") from None
    missing = missing_artifacts(done.processes, formats)
    if missing:
        raise CaptureError(missing, phase="postprocess")
    record = _record(
        opened, Status.OK, done.processes, found.to_dict(), postprocess_s=time.monotonic() - start
    )
    if done.lint is not None:
        record["lint"] = done.lint
    manifest_mod.write(capture, record)
    return record


def evidence(opened: _Open, error: BaseException) -> None:
    """The manifest of a window whose block raised: what it saved, and the error."""
    staging = opened.staging
    assert staging is not None
    capture = staging.finalize()
    failure = error if isinstance(error, IketError) else CaptureError(
        f"the window's block raised {type(error).__name__}: {error}",
        phase="window",
        hint="the trace of what ran before it is kept here; fix the block and capture again",
    )  # fmt: skip
    status = Status.INTERRUPTED if isinstance(error, KeyboardInterrupt) else Status.FAILED
    manifest_mod.write(
        capture, _record(opened, status, artifacts.scan_processes(capture), None, error=failure)
    )


def _record(
    opened: _Open,
    status: str,
    processes: list[dict[str, Any]],
    completeness: dict[str, Any] | None,
    *,
    error: IketError | None = None,
    postprocess_s: float | None = None,
) -> dict[str, Any]:
    from ..system.toolchain import own_distribution

    owner = opened.owner
    finished_at = datetime.now(timezone.utc)
    return record_mod.build(
        status=status,
        target={"kind": "window", "spec": opened.where, "args": [], "display": f"window at {opened.where}"},
        cwd=str(Path.cwd()),
        started_at=opened.started_at,
        finished_at=finished_at,
        duration_s=round(time.monotonic() - opened.t0, 3),
        versions=versions(own_distribution()[0], []),
        postprocess=[f for f in FORMATS if f in owner.formats],
        processes=processes,
        keep=False,
        error=error,
        phases={
            "window": opened.window_s,
            "postprocess": None if postprocess_s is None else round(postprocess_s, 3),
        },
        completeness=completeness,
        window={
            "number": opened.number,
            "where": opened.where,
            **(opened.session.applied if opened.session else {}),
            "skipped_modules": opened.skipped,
        },
    )


def _log_lines(capture: Path) -> list[str]:
    from ..model.vocab import LOG_NAME

    try:
        return (capture / LOG_NAME).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
