"""The CLI's standard streams, made safe before anything is written to them.

A cluster job or a script may start iket with a standard stream closed (``>&-``, ``2>&-``),
pointing at a full device (``>/dev/full``), or with an encoding that cannot hold a kernel's
name (``PYTHONIOENCODING=ascii``, a ``C`` locale). None of those is iket's problem to die of:

* a closed descriptor 0, 1 or 2 is opened on ``/dev/null`` first, so that nothing iket opens
  later takes its number (a capture's log written to "stdout"), and children inherit a
  valid one;
* stdout and stderr replace what their encoding cannot hold (``\\udcff``, ``\\xe9``) instead of
  raising ``UnicodeEncodeError``;
* neither stream ever raises: a write that fails is dropped (stderr: people, who may be
  gone); stdout carries data (``--json``, tables, the workload's output), so
  :func:`flush_stdout` says in one line, at the end, when it could not all be written.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

from ..errors import IketError


def prepare() -> None:
    """Make the standard streams safe (see the module's docstring). Call once, at start-up,
    in the ``iket`` process itself (never in a caller's process: the Python API)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            stream = open(1 if name == "stdout" else 2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        with contextlib.suppress(AttributeError, ValueError, io.UnsupportedOperation):
            stream.reconfigure(errors="backslashreplace")
        setattr(sys, name, stream)
    sys.stdout, sys.stderr = Forgiving(sys.stdout), Forgiving(sys.stderr)


class Forgiving:
    """A text stream whose writes never raise. For stderr, messages to people who may be gone;
    for stdout, data: the first failure is kept in ``error`` (reported once, at the end, by
    :func:`flush_stdout`) and the rest of the output goes to ``/dev/null``, so that a command
    whose reader is gone (``| head``) or whose disk is full still finishes its work."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.error: OSError | ValueError | None = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError) as error:
            self._failed(error)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError) as error:
            self._failed(error)

    def _failed(self, error: OSError | ValueError) -> None:
        if self.error is None:
            self.error = error
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def take_stdout_error() -> str | None:
    """Why stdout could not be written so far (then forgotten: the caller reports it its own
    way), or None. For a command whose stdout carried only what it passed through (the
    workload's output of ``iket profile``), not its result."""
    sys.stdout.flush()
    error = getattr(sys.stdout, "error", None)
    if error is None:
        return None
    sys.stdout.error = None
    return None if isinstance(error, BrokenPipeError) else getattr(error, "strerror", None) or str(error)


def flush_stdout() -> IketError | None:
    """Flush stdout; the error to report when its data could not all be written (a full
    disk, a closed descriptor), None when it was, or when its reader left early (``| head``:
    it had what it wanted)."""
    sys.stdout.flush()
    error = getattr(sys.stdout, "error", None)
    if error is None or isinstance(error, BrokenPipeError):
        return None
    reason = getattr(error, "strerror", None) or str(error)
    return IketError(
        f"could not write to standard output: {reason}",
        hint="send it where there is room (or to a reader that reads it all)",
    )
