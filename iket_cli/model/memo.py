"""What the code that wrote a file tells the next reader of that file, in the same process.

A JSON export merged from parts (:mod:`iket_cli.decode.split.join`) is counted as it is merged
and assembled in memory from the columns its workers scanned while the other launches
decoded (:mod:`iket_cli.decode.split.columns`). The manifest's counts
(:func:`iket_cli.model.artifacts.count_keys`) and the report, lint and summary
(:func:`iket_cli.model.trace.load`) then take them here instead of reading the merged file
again (seconds, for the biggest). Everything is kept for the file as it is (inode, size, modification
time): a file replaced or rewritten is another file.
"""

from __future__ import annotations

import threading
from pathlib import Path

#: At most this many traces are held: a capture of many big processes reads the others.
MOST_TRACES = 2
#: Counts kept before the memo starts afresh (a long-lived ``iket run`` never grows it).
MOST_COUNTS = 256
_TRACES: dict[tuple, object] = {}
_COUNTS: dict[tuple, list[int]] = {}
#: ``iket run`` decodes its jobs in threads of one process.
_LOCK = threading.Lock()


def identity(path: Path) -> tuple | None:
    """(path, inode, size, mtime) of the file as it is now; None where it cannot be read."""
    try:
        info = Path(path).stat()
    except OSError:
        return None
    return (str(path), info.st_ino, info.st_size, info.st_mtime_ns)


def hold(path: Path, trace: object) -> None:
    """Hand ``trace`` (the model of ``path``, just written) to the next load of that file."""
    key = identity(path)
    if key is None:
        return
    with _LOCK:
        while len(_TRACES) >= MOST_TRACES:
            _TRACES.pop(next(iter(_TRACES)))  # the oldest goes: its reader reads the file
        _TRACES[key] = trace


def take(path: Path) -> object | None:
    """The trace held for ``path`` as it is now (then no longer held), or None."""
    key = identity(path)
    if key is None:
        return None
    with _LOCK:
        return _TRACES.pop(key, None)


def counts(path: Path, keys: tuple, count) -> list[int]:
    """``count(path, keys)``, remembered for the file as it is."""
    key = identity(path)
    if key is None:
        return count(path, keys)
    key = (*key, keys)
    with _LOCK:
        known = _COUNTS.get(key)
    if known is None:
        known = count(path, keys)
        with _LOCK:
            if len(_COUNTS) >= MOST_COUNTS:
                _COUNTS.clear()
            _COUNTS[key] = known
    return list(known)


def tell_counts(path: Path, keys: tuple, found: list[int]) -> None:
    """What :func:`counts` would find for ``keys`` in ``path``, told by its writer."""
    key = identity(path)
    if key is not None:
        with _LOCK:
            _COUNTS[(*key, keys)] = list(found)
