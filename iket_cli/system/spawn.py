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
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise SpawnError(
            f"{os.fspath(argv[0])} gave no answer within {timeout:g} s", command=quote(argv)
        ) from None
    except BaseException:  # Ctrl-C or SIGTERM while waiting: the child goes too
        _kill_group(proc)
        raise
    return Completed([os.fspath(w) for w in argv], proc.returncode, out, err)


#: Seconds to wait for a killed child's pipes to close before leaving it.
KILLED_WAIT_S = 2.0


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=KILLED_WAIT_S)
    except subprocess.TimeoutExpired:
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
