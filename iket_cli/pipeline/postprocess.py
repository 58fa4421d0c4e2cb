"""``iket postprocess``: decode a capture kept with ``--keep``, on any machine.

Works on a capture kept by ``iket profile --keep`` or by ``run-iket --keep``: every kept
raw capture is decoded by the worker pool (:mod:`iket_cli.decode`), then linted and made
into its report (:mod:`.finish`), and the manifest is updated, or created for a folder
that raw run-iket made.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..capture import outdir
from ..decode import prestart
from ..decode import tasks as tasks_mod
from ..decode.tasks import Outcome, Progress
from ..errors import CaptureInterrupted, Status, Terminated, UsageError, signal_of
from ..model import artifacts
from ..model.vocab import FORMATS, MANIFEST_NAME, STATS_NAME, trace_glob
from ..system import signals

if TYPE_CHECKING:
    from .decoding import Decode


def postprocess_capture(
    capture_dir: Path, formats: list[str], *, jobs: int | None = None, progress: Progress | None = None
) -> tuple[dict[str, Any], list[Outcome], list[tuple[str, str]]]:
    """Decode every kept raw capture in ``capture_dir`` and write or update its manifest.

    Returns the manifest, each task's outcome and warnings (message, hint) about what
    could not be used; a task that failed is named in the manifest's ``error`` and leaves
    the other processes' artifacts in place.
    """
    if not capture_dir.is_dir():
        raise UsageError(f"{capture_dir} is not a directory", hint="give a capture made with --keep")
    tasks = tasks_mod.plan(capture_dir, formats)
    if not tasks and not any(capture_dir.glob(trace_glob())):
        raise UsageError(
            f"{capture_dir} holds no raw capture (no iket/pid_*/iket.data.json) and no JSON trace",
            hint="capture with iket profile --keep (or run-iket --keep) to decode later",
        )
    # the workers start now, importing the decoder while this process imports the decode
    prestarted = prestart.for_tasks(tasks, jobs)
    try:
        with signals.as_exception():
            try:
                with outdir.Lock(capture_dir), _as_before_unless_done(capture_dir):
                    return _decode(capture_dir, formats, tasks, jobs, progress, prestarted)
            except (KeyboardInterrupt, Terminated) as error:  # after the decode: its lint and report
                after = " after decoding" if tasks else ""
                raise CaptureInterrupted.by(signal_of(error), after, phase="postprocess") from None
    finally:
        if prestarted is not None:
            prestarted.close()


#: Beside an artifact while a decode may replace it (a hard link: the bytes as they were).
BEFORE_SUFFIX = ".iket-before"


@contextlib.contextmanager
def _as_before_unless_done(capture_dir: Path) -> Iterator[None]:
    """The folder's artifacts and manifest exactly as they were, unless the block ends well:
    an interrupt (or any failure) removes the artifacts the decode added and puts back those
    it replaced. Each is kept meanwhile as a hard link (no copy; where links are refused,
    a copy)."""
    kept = [p for p in capture_dir.iterdir() if artifacts.is_artifact(p.name) or p.name == MANIFEST_NAME]
    backups = {path: path.with_name(f".{path.name}{BEFORE_SUFFIX}") for path in kept}
    for path, backup in backups.items():
        backup.unlink(missing_ok=True)  # a killed decode's
        try:  # a link is kept as the link it is (a dangling one too), never followed
            os.link(path, backup, follow_symlinks=False)
        except OSError:
            shutil.copy2(path, backup, follow_symlinks=False)
    try:
        yield
    except BaseException:
        for path in capture_dir.iterdir():
            if artifacts.is_artifact(path.name) and path not in backups:
                path.unlink(missing_ok=True)
        for path, backup in backups.items():
            os.replace(backup, path)
        raise
    finally:
        for backup in backups.values():
            backup.unlink(missing_ok=True)


def _decode(
    capture_dir: Path,
    formats: list[str],
    tasks: list,
    jobs: int | None,
    progress: Progress | None,
    prestarted: prestart.Prestarted | None,
) -> tuple[dict[str, Any], list[Outcome], list[tuple[str, str]]]:
    """Decode (or, a folder of JSON traces alone, export from the JSON), lint, report, and
    write the manifest: the failed tasks named in it, the others' artifacts in place."""
    from ..decode import pool
    from .decoding import decode_folder

    started, t0 = datetime.now(timezone.utc), time.monotonic()
    # what a decode that was killed (kill -9) left half-written, whatever formats it was making
    for task in tasks_mod.plan(capture_dir, list(FORMATS)):
        for leftover in pool.partials(task):
            leftover.unlink(missing_ok=True)
    had_json = frozenset(p.name for p in capture_dir.glob(trace_glob()))
    known: dict[str, Any] = {}

    def meanwhile() -> None:  # what only the end needs, while the workers decode
        from ..model import manifest as manifest_mod
        from .finish import finish  # noqa: F401

        existing = (capture_dir / MANIFEST_NAME).is_file()
        known["record"] = manifest_mod.read(capture_dir) if existing else _new_manifest(capture_dir, started)

    done = decode_folder(capture_dir, formats, tasks=tasks, jobs=jobs, progress=progress,
                         prestarted=prestarted, meanwhile=meanwhile)  # fmt: skip
    return _finished(capture_dir, formats, known["record"], done, had_json, t0, json_only=not tasks)


def _finished(
    capture_dir: Path,
    formats: list[str],
    record: dict[str, Any],
    done: Decode,
    had_json: frozenset[str],
    t0: float,
    *,
    json_only: bool,
) -> tuple[dict[str, Any], list[Outcome], list[tuple[str, str]]]:
    """Lint, report and the manifest of a decoded folder (``t0``: when its decode began)."""
    from ..model import manifest as manifest_mod
    from ..model import record as record_mod
    from .finish import finish

    outcomes = done.outcomes
    counted, traces = tasks_mod.known_counts(outcomes), done.traces()
    if json_only:  # no raw capture to read: what the traces show by themselves is recorded
        record["completeness"] = _judged_from_traces(capture_dir, record.get("completeness"), traces)
    joined = tasks_mod.known_joins(outcomes)
    record["processes"] = artifacts.rescan(capture_dir, record["processes"], counted, joined)
    finished = finish(capture_dir, record, formats, kept=had_json, traces=traces, ahead=done.ahead)
    record["processes"] = finished.processes
    if finished.lint is not None:
        record["lint"] = finished.lint
    made = {*record["postprocess"], *formats, *(["json"] if json_only else [])}
    record["postprocess"] = [f for f in FORMATS if f in made]
    record["phases"] = {**record["phases"], "postprocess": round(time.monotonic() - t0, 3)}
    if done.error is not None:
        record["status"] = Status.FAILED
        record["error"] = record_mod.error_record(done.error)
    manifest_mod.write(capture_dir, record)
    return record, outcomes, finished.warnings


def _judged_from_traces(
    capture_dir: Path, record: dict[str, Any] | None, held: dict[str, Any]
) -> dict[str, Any]:
    """``record`` with each JSON trace's own losses added (those the export still holds, the
    others read again, their warps' lifetimes only)."""
    from ..analysis import completeness as judge
    from ..model import trace as trace_mod
    from ..model.vocab import pid_of

    shown = []
    for path in sorted(capture_dir.glob(trace_glob())):
        loaded = held.get(path.name) or trace_mod.load(path, ("warps",))
        shown += [{**loss, "pid_hex": pid_of(path.name)} for loss in judge.from_trace(loaded)]
    return judge.with_traces(record, shown)


def _new_manifest(capture_dir: Path, started: datetime) -> dict[str, Any]:
    """A manifest for a folder that raw run-iket made: what can be known after the fact."""
    from ..analysis import completeness as judge
    from ..model import record as record_mod
    from ..model.folder import configured_mode
    from ..system.machine import versions
    from ..system.toolchain import own_distribution

    return record_mod.build(
        status=Status.OK,
        mode=configured_mode(capture_dir),
        target={"kind": "unknown", "spec": "", "args": [], "display": "(captured by run-iket)"},
        cwd=str(capture_dir.resolve()),
        started_at=started,
        finished_at=started,
        duration_s=0.0,
        phases=artifacts.phases_from_stats(capture_dir / STATS_NAME),
        versions=versions(own_distribution()[0], []),
        postprocess=[],
        keep=True,
        processes=[],
        log=None,
        completeness=judge.check(judge.gather(capture_dir)).to_dict(),
    )
