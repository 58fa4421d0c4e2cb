"""The end of a capture: lint and report, check every artifact is there, write the manifest,
publish the staging folder (a repeated capture's repeats with it).

Where a capture becomes visible: everything before this is in the staging folder, which a
failure or an interrupt removes; from :class:`.Publishing` on, a signal only is reported.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from typing import Any

from ..capture.events import Reporter
from ..capture.plan import Plan
from ..capture.staging import Staging
from ..errors import CaptureError, IketError, Status
from ..model import artifacts
from ..model import manifest as manifest_mod
from ..model.vocab import INTERMEDIATES, artifacts_for
from ..system.signals import Publishing
from . import attempt, repeats
from .attempt import Facts
from .capture import Capture
from .decoding import Decoded


def publish(
    plan: Plan,
    staging: Staging,
    facts: Facts,
    formats: list[str],
    reporter: Reporter,
    publishing: Publishing,
    decoded: Decoded,
) -> Capture:
    """Lint and report, check every artifact is there, write the manifest, publish.
    ``decoded``: the decodes of repeat 1's folder and the others', what they know of the
    traces they wrote handed to the scans and the reports."""
    from .finish import finish  # imported by _preload while the passes ran

    capture = staging.finalize()
    processes = artifacts.scan_processes(capture, decoded.counted(capture), decoded.joined(capture))
    start = time.monotonic()
    try:
        draft = attempt.manifest(plan, staging, facts, Status.OK, processes)
        finished = finish(
            capture, draft, formats, traces=decoded.traces(capture), ahead=decoded.ahead(capture)
        )
    except IketError as error:
        raise CaptureError(f"the HTML report failed: {error.message}", phase="postprocess") from None
    reporter.phase("publish")  # the reports were postprocessing: the console and manifest agree
    if "html" in formats:  # the reports count as postprocessing
        facts = replace(facts, postprocess_s=round((facts.postprocess_s or 0) + time.monotonic() - start, 3))
    processes = finished.processes
    for message, hint in finished.warnings:
        reporter.warn(message, hint)
    missing = missing_artifacts(processes, formats)
    if missing:
        raise CaptureError(missing, phase="postprocess")
    lint = finished.lint or []
    if facts.repeats:
        more, more_lint = repeats.publish(
            capture, staging, facts.repeats, draft, formats, missing_artifacts, decoded
        )
        processes, lint = repeats.numbered(processes, 1) + more, repeats.numbered(lint, 1) + more_lint
    if not plan.options.keep:
        for name in INTERMEDIATES:
            shutil.rmtree(capture / name, ignore_errors=True)
        repeats.drop_intermediates(capture, facts.repeats or [])
        for process in processes:
            process["raw"] = None
    status = repeats.status(facts.repeats or [], bool(facts.drift))
    record = attempt.manifest(plan, staging, facts, status, processes, drift=facts.drift, lint=lint)
    manifest_mod.write(capture, record)
    for finding in lint:
        reporter.warn(f"pid {finding['process']}: [{finding['code']}] {finding['message']}", finding["hint"])
    published = staging.publish(hold=publishing.hold, clobber=plan.options.clobber)
    publishing.published = Capture(published, record)
    return publishing.published


def missing_artifacts(processes: list[dict[str, Any]], formats: list[str]) -> str | None:
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
