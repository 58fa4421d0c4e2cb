"""``iket profile --repeat N``: one tracker pass, then N capture passes of the same workload.

One capture is one sample: a range of a few hundred nanoseconds moves by whole 32 ns timer
steps from run to run, so a single pair of captures cannot tell a 5% regression from noise.
Repeat 1 is the ordinary capture (its tracker pass fresh, reused or given) at the capture's
top level; repeats 2..N run only the capture pass (``--use-tracker-dir`` with repeat 1's
tracker output) into ``repeat-<k>/`` and are decoded there, each with a warm standby that
imported the workload's libraries while the run before it ran.

Each repeat is checked against the tracker pass as a reused one is (the same kernels, the
same cubins, the same launch counts): one that does not fit is marked ``drifted`` and left
out of the statistics. A repeat that fails is recorded with its error and the others kept
(status ``partial``); only a timeout or an interrupt stops the whole capture, as it would
a single one.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..capture.plan import Plan
from ..capture.staging import Staging
from ..capture.two_pass import passes, trackers
from ..capture.two_pass.passes import PassResult, Transcript
from ..errors import CaptureInterrupted, CaptureTimeout, IketError, Status
from ..model.vocab import INTERMEDIATES, RAW_DIR, TRACKER_DIR, TRACKER_GIVEN, repeat_dir
from .attempt import Attempt

#: A repeat's status in the manifest's ``repeats`` list.
OK, DRIFTED, FAILED = "ok", "drifted", "failed"


@dataclass
class Repeat:
    """One capture pass of a repeated capture, as the manifest records it."""

    index: int
    dir: str  # inside the capture ("" for repeat 1)
    status: str = OK
    capture_s: float | None = None  # the capture pass, from run-iket's start to its end
    error: str | None = None
    drift: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)  # pid_hex of its processes

    def record(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "dir": self.dir,
            "status": self.status,
            "capture_s": self.capture_s,
            "error": self.error,
            "drift": self.drift,
            "processes": self.processes,
        }


def first(ran: PassResult, drift: list[str]) -> Repeat:
    """Repeat 1: the capture's own passes."""
    return Repeat(1, "", DRIFTED if drift else OK, round(ran.duration_s, 3), drift=list(drift))


def tracker_of(plan: Plan, staging: Staging) -> Path | None:
    """The tracker output repeat 1 used: the one it was given, or the one its tracker pass
    wrote (None for ``--warp-trace``: every run records warp lifetimes on its own)."""
    if plan.tracker.dir is not None:
        return plan.tracker.dir
    made = staging.capture_dir / TRACKER_DIR
    return made if made.is_dir() else None


def more(at: Attempt, decode, standby=None) -> list[Repeat]:
    """Repeats 2..N, one after another; ``decode(folder)`` decodes one (raising on failure).

    ``standby``: the one started beside repeat 1 for repeat 2 (:func:`passes.ahead`).
    """
    plan, staging, transcript, deadline, cancel = at.plan, at.staging, at.transcript, at.deadline, at.cancel
    total = plan.options.repeat
    tracker_dir = tracker_of(plan, staging)
    given = None if tracker_dir is None else trackers.Tracker(TRACKER_GIVEN, dir=tracker_dir)
    repeat_plan = plan if given is None else replace(plan, tracker=given)
    done: list[Repeat] = []
    try:
        for index in range(2, total + 1):
            current = standby
            standby = passes.ahead(plan, staging, f"r{index + 1}") if index < total else None
            transcript.reporter.phase(f"repeat {index} of {total}")
            done.append(
                _one(repeat_plan, staging, transcript, decode, index, tracker_dir, deadline, cancel, current)
            )
    finally:
        if standby is not None:
            standby.close()
    return done


def _one(
    plan: Plan,
    staging: Staging,
    transcript: Transcript,
    decode,
    index: int,
    tracker_dir: Path | None,
    deadline: float | None,
    cancel: threading.Event | None,
    standby,
) -> Repeat:
    name = repeat_dir(index)
    folder = staging.capture_dir / name
    transcript.note(f"repeat {index}: the capture pass into {name}/")
    ran = passes.capture(
        plan, staging, transcript, deadline=deadline, cancel=cancel, into=folder, standby=standby
    )
    repeat = Repeat(index, name, capture_s=round(ran.duration_s, 3))
    failure = ran.failure()
    if isinstance(failure, (CaptureTimeout, CaptureInterrupted)):
        raise failure  # the whole capture stops, as a single one would
    if failure is None and tracker_dir is not None:
        reason = trackers.stale(tracker_dir, folder / RAW_DIR)
        repeat.drift = [f"repeat {index} does not fit the tracker pass: {reason}"] if reason else []
    if failure is None:
        try:
            decode(folder)
        except IketError as error:
            failure = error
    if failure is not None:
        repeat.status, repeat.error = FAILED, failure.message
        transcript.reporter.warn(
            f"repeat {index} failed: {failure.message}",
            "the other repeats are kept (status partial); its output is in iket.log",
        )
        if not plan.options.keep:
            shutil.rmtree(folder, ignore_errors=True)
    elif repeat.drift:
        repeat.status = DRIFTED
        transcript.reporter.warn(repeat.drift[0], "it is kept, and left out of the statistics")
    return repeat


def drop_intermediates(capture_dir: Path, repeats: list[Repeat]) -> None:
    """run-iket's tracker/, gen-config/ and iket/ of repeats 2..N (without ``--keep``)."""
    for repeat in repeats:
        if repeat.dir:
            for name in INTERMEDIATES:
                shutil.rmtree(capture_dir / repeat.dir / name, ignore_errors=True)


def status(repeats: list[Repeat], drifted: bool) -> str:
    """The capture's status: ``partial`` when a repeat failed, ``suspect`` when repeat 1's
    passes drifted (as for a single capture), else ``ok``."""
    if any(r.status == FAILED for r in repeats):
        return Status.PARTIAL
    return Status.SUSPECT if drifted else Status.OK


def publish(
    capture_dir: Path,
    staging: Staging,
    done: list[Repeat],
    draft: dict[str, Any],
    formats: list[str],
    missing,
    decoded,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Lint and report repeats 2..N as repeat 1 was; their processes (paths inside the
    capture, ``repeat`` set) and lint findings. ``missing(processes, formats)`` names an
    artifact a repeat lacks: that repeat counts as failed, the others stand. ``decoded``
    (:class:`~iket_cli.pipeline.decoding.Decoded`) gives what each repeat's decode knows."""
    from ..model import artifacts, labels
    from ..model.vocab import PROCS_NAME
    from .finish import finish

    first = next(r for r in done if r.index == 1)
    first.processes = [p["pid_hex"] for p in draft["processes"]]
    processes: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    for repeat in done:
        if repeat.index == 1 or repeat.status == FAILED:
            continue
        folder = capture_dir / repeat.dir
        found = artifacts.scan_processes(folder, decoded.counted(folder), decoded.joined(folder))
        labels.attach(found, staging.root / PROCS_NAME)
        record = {**draft, "processes": found}
        finished = finish(folder, record, formats, traces=decoded.traces(folder), ahead=decoded.ahead(folder))
        lacking = missing(finished.processes, formats)
        if lacking:
            repeat.status, repeat.error = FAILED, lacking
            continue
        repeat.processes = [p["pid_hex"] for p in finished.processes]
        processes += numbered([_inside(p, repeat.dir) for p in finished.processes], repeat.index)
        findings += numbered(finished.lint or [], repeat.index)
    return processes, findings


def numbered(entries: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    """Processes or lint findings, each marked with the repeat it belongs to."""
    return [{**entry, "repeat": index} for entry in entries]


def _inside(process: dict[str, Any], folder: str) -> dict[str, Any]:
    """A repeat's process with its paths relative to the capture, not to its folder."""
    arts = {kind: {**a, "path": f"{folder}/{a['path']}"} for kind, a in process["artifacts"].items()}
    raw = process.get("raw")
    return {**process, "artifacts": arts, "raw": f"{folder}/{raw}" if raw else raw}
