"""Running run-iket: streaming its output, timeouts, signals and stop requests.

run-iket starts in a session of its own, so a Ctrl-C at the terminal reaches only the CLI,
which then stops the whole tree in order (SIGINT, SIGTERM, SIGKILL; see :mod:`.tree`) and
waits for it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..errors import CaptureInterrupted, CaptureTimeout, Terminated, signal_of
from . import signals, spawn
from .tree import GRACE_S, kill_tree, signal_tree

#: Lines of output kept in memory for error messages.
TAIL_LINES = 40


class Line(NamedTuple):
    """One line of a run's output, and where it came from."""

    text: str
    #: True for run-iket's own stdout/stderr (its messages, its Python tracebacks); False for
    #: the workload's output, which the shim sends through the FIFO.
    tool: bool
    #: Printed while iket was stopping the tree (a timeout, an interrupt): the dying words of
    #: processes iket signalled itself, such as a Python workload's KeyboardInterrupt
    #: traceback. They belong in the log, not on the user's terminal.
    stopping: bool = False


@dataclass
class RunResult:
    """How a run ended: its exit status and the last lines it printed."""

    returncode: int
    duration_s: float
    tail: list[Line] = field(default_factory=list)


def run_streaming(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    on_line: Callable[[Line], None],
    timeout: float | None = None,
    limit_s: float | None = None,
    side_stream: Path | None = None,
    stop: threading.Event | None = None,
    cancel: threading.Event | None = None,
    on_tick: Callable[[], None] | None = None,
) -> RunResult:
    """Run ``argv`` with stdout+stderr merged, calling ``on_line`` for each decoded line.

    ``side_stream``, if given, is a FIFO that children may write to as well (the shim
    sends the workload's output there, because run-iket holds it back until a pass ends);
    its lines reach ``on_line`` as they come, marked as the workload's. Output that is not
    UTF-8 is decoded with replacement characters, never fatally. ``limit_s`` is the limit
    a timeout message names (the user's ``--timeout``, of which ``timeout`` may be what is
    left). Raises :class:`CaptureTimeout` or :class:`CaptureInterrupted` after the whole
    tree is gone, and :class:`Stopped` once ``stop`` was set (by ``on_line``, say) and the
    tree is gone. ``cancel`` set from another thread (``iket run``'s Ctrl-C, which only
    the main thread receives) stops the tree as a SIGINT would.
    """
    start = time.monotonic()
    lock = threading.Lock()
    tail: deque[Line] = deque(maxlen=TAIL_LINES)
    stopping = threading.Event()

    def emit(text: str, tool: bool) -> None:
        line = Line(text, tool, stopping.is_set())
        with lock:
            tail.append(line)
            on_line(line)
            if stop is not None and stop.is_set() and proc is not None:
                signal_tree(proc.pid, signal.SIGKILL)  # now, from this thread: not a poll later

    proc: subprocess.Popen | None = None
    side = _SideStream(side_stream, lambda text: emit(text, False)) if side_stream else None
    try:
        proc = spawn.start(argv, env=env, cwd=cwd, stdout=spawn.PIPE, stderr=spawn.STDOUT, new_session=True)
    except BaseException:
        if side:
            side.close()
        raise
    ended = threading.Event()
    reader = threading.Thread(target=_pump, args=(proc, lambda text: emit(text, True), ended), daemon=True)
    reader.start()

    def end_early(signum: int = signal.SIGTERM) -> None:
        """The tree killed (``signum`` first), the rest of its output left unread."""
        stopping.set()
        kill_tree(proc, first=signum)
        ended.set()
        reader.join(GRACE_S)
        if side:
            side.close()

    try:
        with signals.as_exception():
            returncode = _wait(proc, timeout, stop, cancel, on_tick)
    except Stopped:
        end_early()
        raise Stopped(list(tail)) from None
    except subprocess.TimeoutExpired:
        end_early()
        timed_out = CaptureTimeout(
            f"timed out after {limit_s or timeout:g} s; the whole process tree was killed",
            hint="raise --timeout, or make the workload smaller",
        )
        timed_out.tail = list(tail)
        raise timed_out from None
    except (KeyboardInterrupt, Terminated, Cancelled) as signalled:  # not `stop`: the reader reads that
        signum = signal_of(signalled)
        end_early(signum)
        interrupted = CaptureInterrupted.by(signum, "; the whole process tree was stopped")
        interrupted.tail = list(tail)
        raise interrupted from None
    ended.set()  # a detached helper of the workload may hold the pipe open: not waited for
    reader.join()
    if side:
        side.close()
    return RunResult(returncode, time.monotonic() - start, list(tail))


class Stopped(Exception):
    """The caller asked the run to stop (``stop`` was set); ``tail`` holds the last lines."""

    def __init__(self, tail: list[Line] | None = None) -> None:
        super().__init__("stopped on request")
        self.tail = tail or []


class Cancelled(Exception):
    """``cancel`` was set: stop as for Ctrl-C."""


def wait_all(futures: list, cancel: threading.Event | None = None) -> None:
    """Wait for every future in short slices, so that a signal (in the main thread) or
    ``cancel`` is seen at once; raises :class:`Cancelled` once ``cancel`` is set."""
    from concurrent.futures import wait

    pending = set(futures)
    while pending:
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        _, pending = wait(pending, timeout=0.2)


def _wait(
    proc: subprocess.Popen,
    timeout: float | None,
    stop: threading.Event | None = None,
    cancel: threading.Event | None = None,
    on_tick: Callable[[], None] | None = None,
) -> int:
    """Wait in short slices so that signals, stop and cancel requests are handled promptly;
    ``on_tick`` is called at each slice."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if on_tick is not None:
            on_tick()
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        if stop is not None and stop.is_set():
            raise Stopped()
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout or 0)
        try:
            code = proc.wait(timeout=0.2 if remaining is None else min(0.2, remaining))
        except subprocess.TimeoutExpired:
            continue
        if stop is not None and stop.is_set():
            raise Stopped()  # it ended because we killed it
        return code


#: Once run-iket has exited, how long its pipe is still read: what its children wrote last
#: is in it, but a helper the workload detached (a process of its own session) may hold the
#: pipe open for as long as it lives, and the pass must end with run-iket, not with it.
DRAIN_QUIET_S = 0.2
DRAIN_MAX_S = 2.0


def _pump(proc: subprocess.Popen, emit: Callable[[str], None], ended: threading.Event) -> None:
    """Pass each line of run-iket's output to ``emit``: to the end of the pipe, or, once
    ``ended`` is set (run-iket exited), until it has been quiet for :data:`DRAIN_QUIET_S`
    (at most :data:`DRAIN_MAX_S`); then the pipe is closed."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    pending = b""
    drain_until = None
    with proc.stdout:
        while True:
            if ended.is_set() and drain_until is None:
                drain_until = time.monotonic() + DRAIN_MAX_S
            wait = 0.1 if drain_until is None else DRAIN_QUIET_S
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                if drain_until is not None:
                    break  # quiet since run-iket ended: what is left belongs to a detached helper
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                emit(raw.decode("utf-8", "replace").rstrip("\r"))
            if drain_until is not None and time.monotonic() > drain_until:
                break
    if pending:
        emit(pending.decode("utf-8", "replace").rstrip("\r"))


class _SideStream:
    """Reads a FIFO in a thread until :meth:`close`, passing on whole decoded lines.

    The FIFO is opened non-blocking for reading before any writer exists, so writers'
    ``open`` never blocks; "no writer right now" reads as an empty read, not the end.
    """

    def __init__(self, path: Path, emit: Callable[[str], None]) -> None:
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._emit = emit
        self._stop = threading.Event()
        self._pending = b""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            stopping = self._stop.is_set()
            ready, _, _ = select.select([self._fd], [], [], 0.1)
            data = self._read() if ready else b""
            if data:
                self._feed(data)
            elif stopping:
                break
            elif ready:
                time.sleep(0.05)  # no writer at the moment: select keeps saying "readable"
        if self._pending:
            self._emit(self._pending.decode("utf-8", "replace"))

    def _read(self) -> bytes:
        try:
            return os.read(self._fd, 65536)
        except BlockingIOError:
            return b""

    def _feed(self, data: bytes) -> None:
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            self._emit(line.decode("utf-8", "replace").rstrip("\r"))

    def close(self) -> None:
        """Drain what the writers left, then stop."""
        self._stop.set()
        self._thread.join(GRACE_S)
        os.close(self._fd)
