"""Tracker reuse in the capture pipeline: announce it, check the capture pass against the
reused tracker pass, and keep a fresh tracker pass for the next capture (see
:mod:`iket_cli.capture.two_pass.trackers`). :class:`StaleTracker` tells :func:`iket_cli.pipeline.profile.run`
to capture again from scratch."""

from __future__ import annotations

import time

from ..capture.plan import Plan
from ..capture.staging import Staging
from ..capture.two_pass import trackers
from ..errors import CaptureError, IketError
from ..model import jsonio
from ..model.vocab import RAW_DIR, TRACKER_DIR, TRACKER_FRESH, TRACKER_REUSED
from .attempt import Attempt


class StaleTracker(Exception):
    """A reused tracker pass did not fit the capture pass: its capture is thrown away (not an
    error, so no ``DIR.failed``) and the capture made again from scratch, once. ``tracker``:
    the one that did not fit (``--extract`` chooses it after the record run, not at resolve)."""

    def __init__(self, reason: str, tracker=None) -> None:
        super().__init__(reason)
        self.tracker = tracker


def capture_failed(failure: IketError) -> bool:
    """A failure of the capture pass itself (not a timeout, an interrupt or a kill): with a
    reused tracker pass, most likely a buffer sized for other kernels."""
    return type(failure) is CaptureError and failure.phase == "capture"


def misfit(plan: Plan, staging: Staging) -> list[str]:
    """A reused tracker pass that does not fit raises :class:`StaleTracker`; a given one
    (``--tracker DIR``) that does not fit makes the capture suspect (the user chose it)."""
    if plan.tracker.dir is None:
        return []
    reason = trackers.stale(plan.tracker.dir, staging.capture_dir / RAW_DIR)
    if reason is not None and plan.tracker.mode == TRACKER_REUSED:
        raise StaleTracker(reason, plan.tracker)
    trackers.fitted(plan.tracker, plan.env)
    return [f"the given tracker output does not fit: {reason}"] if reason else []


def keep(at: Attempt) -> None:
    """This capture's tracker pass, kept for the next capture of the same command; a cache
    that cannot be written only costs the next capture its tracker pass."""
    plan, staging, transcript = at.plan, at.staging, at.transcript
    if plan.tracker.mode != TRACKER_FRESH:
        return
    try:
        kept = trackers.store(plan.tracker, staging.capture_dir / TRACKER_DIR, plan.env, plan.output_dir)
    except OSError as error:
        transcript.note(f"tracker pass not cached: {error}")
        return
    if kept is not None:
        transcript.note(f"tracker pass cached in {kept}")


def age(tracker: trackers.Tracker) -> str:
    """``cached 3 min ago``, from the entry's record."""
    try:
        stored = jsonio.parse((tracker.dir / trackers.META_NAME).read_text())["stored_at"]
    except (OSError, ValueError, KeyError, TypeError):
        return "cached"
    minutes = max(0.0, time.time() - float(stored)) / 60
    return f"cached {minutes:.0f} min ago" if minutes < 120 else f"cached {minutes / 60:.0f} h ago"
