"""A file descriptor's lines, split while a block runs: some to a file, the rest through.

NVIDIA's injection library, loaded into the user's own process for an in-process session,
prints its lines (``[IketInjectionManager] [info] ...``) on the process's stdout (measured on
the H100 at log level 2). Those belong in the capture's ``iket.log``, not on the user's
terminal or in their notebook cell. While :class:`Split` is held the descriptor is a pipe;
a thread reads it, appends the lines ``wanted`` picks to the log and writes every other
line to where the descriptor pointed before, unchanged and in order.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

#: How long leaving waits for the reader to drain what was written (a child process that
#: inherited the pipe may keep it open; its later output then goes nowhere).
DRAIN_S = 2.0


class Split:
    """Hold ``fd`` split: lines for which ``wanted`` is true are appended to ``log``."""

    def __init__(self, fd: int, wanted: Callable[[str], bool], log: Path) -> None:
        self.fd, self.wanted, self.log = fd, wanted, log
        self.kept = 0
        #: Lines lost: the log could not take them (a full disk), or the descriptor went away.
        self.dropped = 0
        self._saved: int | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> Split:
        _flush()
        read, write = os.pipe()
        self._saved = os.dup(self.fd)
        os.dup2(write, self.fd)
        os.close(write)
        self._reader = threading.Thread(target=self._read, args=(read,), daemon=True)
        self._reader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        _flush()
        if self._saved is None:
            return
        os.dup2(self._saved, self.fd)  # the pipe's last write end (ours) closes: the reader ends
        if self._reader is not None:
            self._reader.join(DRAIN_S)
        os.close(self._saved)
        self._saved = None

    def _read(self, read: int) -> None:
        """Drain the pipe to its end whatever fails: a log that cannot be written (a full disk)
        or a descriptor that went away loses lines (counted in :attr:`dropped`), never the
        reader, which a writer blocked on a full pipe would wait for forever."""
        pending = b""
        try:
            with self._log() as log:
                while chunk := os.read(read, 1 << 16):
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        self._route(line + b"\n", log)
                if pending:
                    self._route(pending, log)
        finally:
            os.close(read)

    @contextlib.contextmanager
    def _log(self):
        try:
            handle = open(self.log, "ab")  # noqa: SIM115  (closed below, or None where it cannot open)
        except OSError:
            handle = None
        try:
            yield handle
        finally:
            if handle is not None:
                with contextlib.suppress(OSError):
                    handle.close()

    def _route(self, line: bytes, log) -> None:
        try:
            if self.wanted(line.decode("utf-8", "replace")):
                if log is None:
                    raise OSError("the log could not be opened")
                log.write(line)
                log.flush()
                self.kept += 1
            else:
                os.write(self._saved, line)
        except OSError:
            self.dropped += 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
