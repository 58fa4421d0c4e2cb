"""Tracker reuse: one pass per capture after the first.

The tracker pass only sizes IKET's buffers, yet costs as much as the capture pass. Its output
(``tracker/pid_*/``: each process's launch list, its per-warp event counts and the cubins of the
instrumented modules, a few hundred KB) is still right for the next capture of the same
command, as long as the workload launches the same kernels, compiled the same way. So iket
keeps it, per user, in a cache keyed by what determines it (:func:`key`), and with
``--tracker auto`` hands it to run-iket (``--use-tracker-dir``) to run the capture pass alone.

It then checks: the capture pass must have launched exactly what the cached tracker pass did,
each kernel from the same cubin (:func:`stale`). A kernel compiled anew (an edited body) has a
new cubin, which the cached configuration does not instrument; more events than the buffer was
sized for abort the capture pass. Either way the capture is thrown away, the cached tracker
discarded, and the capture made again from scratch, once (the pipeline does that). A capture's
fresh tracker output is stored for the next one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...model import jsonio
from ...model.artifacts import launch_counts
from ...model.names import short
from ...model.vocab import (
    RAW_MANIFEST,
    RAW_PROCESS_PREFIX,
    TRACKER_AUTO,
    TRACKER_FRESH,
    TRACKER_GIVEN,
    TRACKER_JSON,
    TRACKER_NONE,
    TRACKER_REUSED,
)

AUTO, FRESH = TRACKER_AUTO, TRACKER_FRESH  # --tracker's choices besides a DIR
#: Where the cache lives: ``$IKET_CACHE_DIR``, else ``$XDG_CACHE_HOME/iket``, else ``~/.cache/iket``.
CACHE_ENV = "IKET_CACHE_DIR"
TRACKERS = "trackers"
META_NAME = "meta.json"
#: Entries kept; the least recently used beyond this are removed when one is stored.
KEEP_ENTRIES = 64
#: A command whose reused tracker pass did not fit this many times in a row is not reused
#: again (a workload that compiles its kernels anew each run would pay three passes each time).
MAX_MISSES = 2
MISSES_SUFFIX = ".misses"
#: Variables that can change what a workload launches or how it compiles (prefixes).
RELEVANT_ENV = ("CUDA_", "CUTE_", "TVM_", "TORCH", "PYTORCH", "NCCL_", "PYTHONPATH", "LD_LIBRARY_PATH")


@dataclass(frozen=True)
class Tracker:
    """How a capture gets its tracker output: the manifest's ``tracker`` record.

    ``mode``: ``fresh`` (the tracker pass runs), ``reused`` (from the cache), ``given``
    (``--tracker DIR``) or ``none`` (``--warp-trace``: no tracker pass at all).
    """

    mode: str
    key: str | None = None
    dir: Path | None = None  # the tracker output handed to run-iket (reused, given)
    rerun: str | None = None  # why a reused tracker was thrown away and the capture made again
    source: Path | None = None  # where it came from: the cache entry, or the user's DIR

    def record(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "source": None if self.source is None else str(self.source),
            "key": self.key,
            "rerun": self.rerun,
        }


def cache_root(env: dict[str, str]) -> Path:
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser() / TRACKERS
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "iket" / TRACKERS


def check_choice(choice: str) -> None:
    """Refuse a ``--tracker DIR`` that holds no tracker output (exit 2)."""
    if choice in (AUTO, FRESH):
        return
    if not _valid(Path(choice)):
        raise UsageError(
            f"--tracker {choice} holds no tracker output (no pid_*/{TRACKER_JSON})",
            hint="give auto, fresh, or the tracker/ folder of a capture made with --keep",
        )


def choose(choice: str, *, warp_trace: bool, found: str, env: dict[str, str]) -> Tracker:
    """The tracker for a capture asking ``choice`` (``--tracker``) whose key is ``found``:
    none in warp-trace mode, the given DIR, a cached one that may be reused, or fresh."""
    if warp_trace:
        return Tracker(TRACKER_NONE)
    if choice not in (AUTO, FRESH):
        given = Path(choice).resolve()
        return Tracker(TRACKER_GIVEN, dir=given, source=given)
    entry = cache_root(env) / found
    if choice == AUTO and _valid(entry) and misses(env, found) < MAX_MISSES:
        os.utime(entry)  # recently used: kept longest
        return Tracker(TRACKER_REUSED, key=found, dir=entry, source=entry)
    return Tracker(TRACKER_FRESH, key=found)


def staged(tracker: Tracker, into: Path) -> Tracker:
    """The tracker output copied into the attempt's folder, its cubin paths pointing at the
    copies: run-iket reads the absolute paths the tracker pass wrote, so a kept ``tracker/``
    folder still works after it was moved, and a cache entry that another capture replaces
    meanwhile does not change under this one."""
    if tracker.mode not in (TRACKER_GIVEN, TRACKER_REUSED) or tracker.dir is None:
        return tracker
    _copy(tracker.dir, into, final=into)
    return replace(tracker, dir=into)


def key(what: dict[str, Any]) -> str:
    """The cache key of what determines a tracker pass (``plan.tracker_key`` lists it)."""
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:24]


def relevant(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` that can change what a workload launches or compiles."""
    return {name: value for name, value in sorted(env.items()) if name.startswith(RELEVANT_ENV)}


def store(tracker: Tracker, source: Path, env: dict[str, str], origin: Path) -> Path | None:
    """Keep the tracker output in ``source`` (a capture's ``tracker/``) for the next capture;
    the entry's path, or None where there was nothing to keep. Written beside the entry and
    renamed into place, so a reader never sees half of it."""
    if tracker.key is None or not _valid(source):
        return None
    root = cache_root(env)
    root.mkdir(parents=True, exist_ok=True)
    entry = root / tracker.key
    partial = root / f".{tracker.key}.{os.getpid()}.tmp"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        _copy(source, partial, final=entry)
        (partial / META_NAME).write_text(
            json.dumps({"stored_at": time.time(), "from": str(origin)}, indent=2) + "\n"
        )
        shutil.rmtree(entry, ignore_errors=True)
        os.replace(partial, entry)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    _prune(root)
    return entry


def discard(tracker: Tracker, env: dict[str, str]) -> int:
    """A reused tracker pass that did not fit: its entry removed, the miss counted; the count."""
    if tracker.mode != TRACKER_REUSED or tracker.key is None:
        return 0
    if tracker.dir is not None:
        shutil.rmtree(tracker.dir, ignore_errors=True)
    count = misses(env, tracker.key) + 1
    with contextlib.suppress(OSError):
        (cache_root(env) / f"{tracker.key}{MISSES_SUFFIX}").write_text(str(count))
    return count


def fitted(tracker: Tracker, env: dict[str, str]) -> None:
    """A reused tracker pass that fit: the misses start again from zero."""
    if tracker.mode == TRACKER_REUSED and tracker.key is not None:
        (cache_root(env) / f"{tracker.key}{MISSES_SUFFIX}").unlink(missing_ok=True)


def misses(env: dict[str, str], found: str) -> int:
    """How many times in a row this command's reused tracker pass did not fit."""
    try:
        return int((cache_root(env) / f"{found}{MISSES_SUFFIX}").read_text())
    except (OSError, ValueError):
        return 0


def stale(tracker_dir: Path, raw_dir: Path) -> str | None:
    """Why the capture pass does not fit the tracker output it was given (None: it fits).

    Both passes list each launch with its kernel and cubin (the tracker's ``cubinHash``, the raw
    capture's ``decodeContextId``); pooled over processes, since process ids differ."""
    tracked, tracked_procs = launch_counts(tracker_dir, TRACKER_JSON, "kernelName", "cubinHash")
    captured, captured_procs = launch_counts(raw_dir, RAW_MANIFEST, "kernelName", "decodeContextId")
    if tracked_procs != captured_procs:
        return f"{captured_procs} CUDA process(es) now, {tracked_procs} in the tracker pass"
    for launch in sorted(set(tracked) | set(captured)):
        if tracked[launch] != captured[launch]:
            name, cubin = launch
            return (
                f"{short(name)} from cubin {cubin}: {captured[launch]} launch(es) now, "
                f"{tracked[launch]} in the tracker pass (a kernel compiled anew has a new cubin)"
            )
    return None


def _valid(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob(f"{RAW_PROCESS_PREFIX}*/{TRACKER_JSON}"))


def _copy(source: Path, into: Path, *, final: Path) -> None:
    """Each process's tracker output in ``source`` copied into ``into``, its cubin paths
    pointing where the copy will finally be (``final``: ``into`` itself, or where it is renamed)."""
    for process in sorted(source.glob(f"{RAW_PROCESS_PREFIX}*")):
        if (process / TRACKER_JSON).is_file():
            try:
                shutil.copytree(process, into / process.name, copy_function=_copy_file)
            except _CopyFailed as failed:  # the first error, as itself (a full disk: ENOSPC)
                raise failed.error from None
            _relocate(into / process.name, final / process.name)


class _CopyFailed(Exception):
    """Carries a file copy's OSError out of ``shutil.copytree``, which would otherwise go on
    and raise one ``shutil.Error`` listing every file's failure in a single message."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _copy_file(source: str, target: str) -> str:
    try:
        return shutil.copy2(source, target)
    except OSError as error:
        raise _CopyFailed(error) from None


def _relocate(process: Path, final: Path) -> None:
    """Point the tracker's absolute cubin paths (``modules[].image``) at the copies: run-iket
    reads the cubins from there to generate the configuration."""
    path = process / TRACKER_JSON
    data = jsonio.parse(path.read_bytes())
    for module in data.get("modules", []):
        image = module.get("image")
        if isinstance(image, str):
            module["image"] = str(final / Path(image).name)
    path.write_text(json.dumps(data))


def digest(path: Path | str | None) -> str | None:
    """A file's content, hashed (None: no file)."""
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _prune(root: Path) -> None:
    """Remove the least recently used entries beyond :data:`KEEP_ENTRIES`."""
    entries = [e for e in root.iterdir() if e.is_dir() and re.fullmatch(r"[0-9a-f]{24}", e.name)]
    entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
    for old in entries[KEEP_ENTRIES:]:
        shutil.rmtree(old, ignore_errors=True)
        (root / f"{old.name}{MISSES_SUFFIX}").unlink(missing_ok=True)
