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
from typing import Any

from ..capture import outdir
from ..decode import prestart
from ..decode import tasks as tasks_mod
from ..decode.tasks import Outcome, Progress
from ..errors import CaptureInterrupted, DecodeError, Status, Terminated, UsageError, signal_of
from ..model import artifacts
from ..model.vocab import FORMATS, MANIFEST_NAME, STATS_NAME, trace_glob
from ..system import signals
from ..system.filesystem import DISK_FULL


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
    if not tasks:
        from . import trace_exports

        if not trace_exports.traces_in(capture_dir):
            raise UsageError(
                f"{capture_dir} holds no raw capture (no iket/pid_*/iket.data.json) and no JSON trace",
                hint="capture with iket profile --keep (or run-iket --keep) to decode later",
            )
        with signals.as_exception():
            try:
                with outdir.Lock(capture_dir), _as_before_unless_done(capture_dir):
                    return _from_traces(capture_dir, formats), [], []
            except (KeyboardInterrupt, Terminated) as error:
                raise CaptureInterrupted.by(signal_of(error), "", phase="postprocess") from None
    # the workers start now, importing the decoder while this process imports the decode
    prestarted = prestart.for_tasks(tasks, jobs)
    try:
        with signals.as_exception():
            try:
                with outdir.Lock(capture_dir), _as_before_unless_done(capture_dir):
                    return _decode(capture_dir, formats, tasks, jobs, progress, prestarted)
            except (KeyboardInterrupt, Terminated) as error:  # after the decode: its lint and report
                interrupted = CaptureInterrupted.by(signal_of(error), " after decoding", phase="postprocess")
                raise interrupted from None
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
        try:
            os.link(path, backup)
        except OSError:
            shutil.copy2(path, backup)
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
    from ..decode import pool

    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    # what a decode that was killed (kill -9) left half-written, whatever formats it was making
    for task in tasks_mod.plan(capture_dir, list(FORMATS)):
        for leftover in pool.partials(task):
            leftover.unlink(missing_ok=True)
    had_json = frozenset(p.name for p in capture_dir.glob(trace_glob()))
    with pool.start(tasks, jobs=jobs, progress=progress, prestarted=prestarted) as decoding:
        # what only the end needs is imported while the workers decode, not after them
        from ..model import manifest as manifest_mod
        from ..model import record as record_mod
        from ..system.filesystem import disk_full
        from .finish import Ahead, finish

        ahead = Ahead(capture_dir, formats)
        decoding.listen(ahead.assembled)

        if (capture_dir / MANIFEST_NAME).is_file():
            record = manifest_mod.read(capture_dir)
        else:
            record = _new_manifest(capture_dir, started)
        outcomes = decoding.wait()
    if any(o.errno in DISK_FULL for o in outcomes):
        raise disk_full(capture_dir, sum(t.output_bytes for t in tasks))
    counted, traces = tasks_mod.known_counts(outcomes), tasks_mod.take_traces(outcomes)
    joined = tasks_mod.known_joins(outcomes)
    record["processes"] = artifacts.rescan(capture_dir, record["processes"], counted, joined)
    finished = finish(capture_dir, record, formats, kept=had_json, traces=traces, ahead=ahead)
    record["processes"] = finished.processes
    if finished.lint is not None:
        record["lint"] = finished.lint
    record["postprocess"] = [f for f in FORMATS if f in set(record["postprocess"]) | set(formats)]
    record["phases"] = {**record["phases"], "postprocess": round(time.monotonic() - t0, 3)}
    failed = [o for o in outcomes if o.error]
    if failed:
        record["status"] = Status.FAILED
        record["error"] = record_mod.error_record(decode_error(failed, len(outcomes)))
    manifest_mod.write(capture_dir, record)
    return record, outcomes, finished.warnings


def _from_traces(capture_dir: Path, formats: list[str]) -> dict[str, Any]:
    """A folder of JSON traces and no raw capture (an in-process window's): its Perfetto
    traces written from the JSON, then linted and reported like a decoded capture."""
    from ..model import manifest as manifest_mod
    from . import trace_exports
    from .finish import finish

    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    record = manifest_mod.read(capture_dir) if (capture_dir / MANIFEST_NAME).is_file() else None
    record = record or _new_manifest(capture_dir, started)
    trace_exports.write(capture_dir, formats)
    record["processes"] = artifacts.rescan(capture_dir, record["processes"])
    kept = frozenset(p.name for p in trace_exports.traces_in(capture_dir))
    finished = finish(capture_dir, record, formats, kept=kept)
    record["processes"] = finished.processes
    if finished.lint is not None:
        record["lint"] = finished.lint
    record["postprocess"] = [f for f in FORMATS if f in {*record["postprocess"], *formats, "json"}]
    record["phases"] = {**record["phases"], "postprocess": round(time.monotonic() - t0, 3)}
    manifest_mod.write(capture_dir, record)
    return record


def decode_error(failed: list[Outcome], tasks: int) -> DecodeError:
    """The one error of a decode that failed for some tasks: the first reason, the others
    (one line per broken file) as details."""
    reasons = list(dict.fromkeys(o.error for o in failed if o.error))
    return DecodeError(
        f"{len(failed)} of {tasks} decodes failed: {reasons[0]}", phase="postprocess", details=reasons[1:]
    )


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
