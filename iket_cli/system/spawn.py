"""The one way iket starts a child process.

In the spirit of pip's ``utils/subprocess.py``: the child's environment is a copy with
variables set and unset explicitly; the command is quoted the same way in every message;
a program that cannot be started is an :class:`~iket_cli.errors.SpawnError` that names it
(never an ``OSError`` traceback); and a finished run keeps its output, so an error can
show its last lines.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpawnError

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
TimeoutExpired = subprocess.TimeoutExpired


def environ(
    base: Mapping[str, str] | None = None,
    *,
    set: Mapping[str, str] | None = None,
    unset: Iterable[str] = (),
) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) with ``set`` and ``unset`` applied."""
    env = dict(os.environ if base is None else base)
    env.update(set or {})
    for name in unset:
        env.pop(name, None)
    return env


def quote(argv: Sequence[str | os.PathLike]) -> str:
    """The command as a shell would need it typed: for messages and logs."""
    return " ".join(shlex.quote(os.fspath(word)) for word in argv)


def start(
    argv: Sequence[str | os.PathLike],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    stdin: Any = DEVNULL,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
    new_session: bool = False,
) -> subprocess.Popen:
    """Start ``argv``; stdin is closed unless given. Raises :class:`SpawnError` if it cannot start.

    ``new_session`` puts the child in a session (and process group) of its own, so that a
    Ctrl-C at the terminal reaches only the CLI, which then stops the child in order.
    """
    words = [os.fspath(word) for word in argv]
    try:
        return subprocess.Popen(
            words,
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=text,
            errors="replace" if text else None,
            start_new_session=new_session,
        )
    except OSError as error:
        raise SpawnError(
            f"cannot start {words[0]}: {error.strerror or error}",
            hint="check that it is installed and executable",
            command=quote(words),
        ) from None


@dataclass(frozen=True)
class Completed:
    """A finished child: its command, exit status and output (decoded, invalid bytes replaced)."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def last_line(self) -> str:
        """The last non-blank line of stderr (else stdout): what went wrong, in one line."""
        for stream in (self.stderr, self.stdout):
            lines = [line.strip() for line in stream.splitlines() if line.strip()]
            if lines:
                return lines[-1]
        return f"exit status {self.returncode}"


def run(
    argv: Sequence[str | os.PathLike],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float | None = None,
) -> Completed:
    """Run ``argv`` to its end and keep its output.

    Raises :class:`SpawnError` when it cannot start, or when it outlives ``timeout``: then its
    whole process group is killed (a wrapper script's children hold its pipes open), and the
    wait for it is bounded too (a process stuck in the kernel cannot be reaped; it is left).
    A non-zero exit is not an error here: the caller decides.
    """
    proc = start(argv, env=env, cwd=cwd, stdout=PIPE, stderr=PIPE, text=True, new_session=True)
    try:
        out, err = output(proc, timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise SpawnError(
            f"{os.fspath(argv[0])} gave no answer within {timeout:g} s", command=quote(argv)
        ) from None
    except BaseException:  # Ctrl-C or SIGTERM while waiting: the child goes too
        kill_group(proc)
        raise
    return Completed([os.fspath(w) for w in argv], proc.returncode, out, err)


#: How often :func:`output` looks whether the child itself has ended.
POLL_S = 0.25


def output(proc: subprocess.Popen, timeout: float | None) -> tuple[str, str]:
    """All a text-mode ``proc`` (started with ``new_session``) wrote on its pipes, once it has
    ended: where a process it left behind in its group (a daemon) still holds the pipes, that
    group is killed and what was written by then kept, after a bounded wait
    (:data:`KILLED_WAIT_S`), not the daemon's life. Raises ``TimeoutExpired`` if ``proc`` itself
    outlives ``timeout``."""
    waited = 0.0
    while True:
        try:
            return proc.communicate(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            waited += POLL_S
            if proc.poll() is None:
                if timeout is not None and waited >= timeout:
                    raise
                continue
            try:  # ended: its last words are in the pipes
                return proc.communicate(timeout=KILLED_WAIT_S)
            except subprocess.TimeoutExpired as held:
                partial = held
            with contextlib.suppress(OSError):  # what it left behind in its group goes with it
                os.killpg(proc.pid, signal.SIGKILL)
            for stream in (proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):
                    stream.close()
            return _text(partial.output), _text(partial.stderr)


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


#: Seconds to wait for a killed child's pipes to close before leaving it.
KILLED_WAIT_S = 2.0


def kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc``'s process group (started with ``new_session``) and wait for its pipes a
    bounded time (:data:`KILLED_WAIT_S`): a process left holding them is left, not waited for."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=KILLED_WAIT_S)
    except subprocess.TimeoutExpired:
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
