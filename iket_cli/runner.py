"""Spawning run-iket: streaming its output, timeouts, signals and killing the whole tree.

run-iket starts in a session of its own, so a Ctrl-C at the terminal reaches only the CLI,
which then stops the tree in order (SIGINT, SIGTERM, SIGKILL) and waits for it. The tree
is every process in that session plus every descendant found in ``/proc`` (a workload may
start its own session); the CLI makes itself a child subreaper so that orphans stay
descendants and cannot escape the kill.
"""

from __future__ import annotations

import contextlib
import ctypes
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

from .errors import CaptureInterrupted, CaptureTimeout, ToolchainError

#: Seconds a stopped tree gets after SIGINT and after SIGTERM before SIGKILL.
GRACE_S = 3.0
#: Lines of output kept in memory for error messages.
TAIL_LINES = 40

_PR_SET_CHILD_SUBREAPER = 36
_subreaper = False


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux). True if it worked.

    Only the CLI does this: a library must not change how its host process reaps.
    """
    global _subreaper
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper = False
    return _subreaper


class Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler, like KeyboardInterrupt for SIGINT."""

    signum = signal.SIGTERM


@contextlib.contextmanager
def sigterm_as_exception():
    """Turn SIGTERM into :class:`Terminated` while a capture runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class RunResult:
    """How a run ended: its exit status and the last lines it printed."""

    returncode: int
    duration_s: float
    tail: list[str] = field(default_factory=list)


def run_streaming(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    on_line: Callable[[str], None],
    timeout: float | None = None,
    side_stream: Path | None = None,
    stop: threading.Event | None = None,
) -> RunResult:
    """Run ``argv`` with stdout+stderr merged, calling ``on_line`` for each decoded line.

    ``side_stream``, if given, is a FIFO that children may write to as well (the shim
    sends the workload's output there, because run-iket holds it back until a pass ends);
    its lines reach ``on_line`` as they come. Output that is not UTF-8 is decoded with
    replacement characters, never fatally. Raises :class:`CaptureTimeout` or
    :class:`CaptureInterrupted` after the whole tree is gone, and :class:`Stopped` once
    ``stop`` was set (by ``on_line``, say) and the tree is gone.
    """
    start = time.monotonic()
    lock = threading.Lock()
    tail: deque[str] = deque(maxlen=TAIL_LINES)

    def emit(line: str) -> None:
        with lock:
            tail.append(line)
            on_line(line)
            if stop is not None and stop.is_set() and proc is not None:
                _signal_tree(proc, signal.SIGKILL)  # now, from this thread: not a poll later

    proc: subprocess.Popen | None = None
    side = _SideStream(side_stream, emit) if side_stream else None
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as error:
        if side:
            side.close()
        raise ToolchainError(f"cannot start {argv[0]}: {error.strerror}") from None
    reader = threading.Thread(target=_pump, args=(proc, emit), daemon=True)
    reader.start()
    try:
        with sigterm_as_exception():
            returncode = _wait(proc, timeout, stop)
    except Stopped:
        kill_tree(proc)
        reader.join(GRACE_S)
        if side:
            side.close()
        raise Stopped(list(tail)) from None
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        reader.join(GRACE_S)
        if side:
            side.close()
        raise CaptureTimeout(
            f"timed out after {timeout:g} s; the whole process tree was killed",
            hint="raise --timeout, or make the workload smaller",
            details=list(tail),
        ) from None
    except (KeyboardInterrupt, Terminated) as stop:
        signum = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
        kill_tree(proc, first=signum)
        reader.join(GRACE_S)
        if side:
            side.close()
        raise CaptureInterrupted(
            f"interrupted by {signal.Signals(signum).name}; the whole process tree was stopped",
            exit_code=128 + signum,
            details=list(tail),
        ) from None
    reader.join()
    if side:
        side.close()
    return RunResult(returncode, time.monotonic() - start, list(tail))


class Stopped(Exception):
    """The caller asked the run to stop (``stop`` was set); ``tail`` holds the last lines."""

    def __init__(self, tail: list[str] | None = None) -> None:
        super().__init__("stopped on request")
        self.tail = tail or []


def _wait(proc: subprocess.Popen, timeout: float | None, stop: threading.Event | None = None) -> int:
    """Wait in short slices so that signals and stop requests are handled promptly."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
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


def _pump(proc: subprocess.Popen, emit: Callable[[str], None]) -> None:
    assert proc.stdout is not None
    with proc.stdout:
        for raw in iter(proc.stdout.readline, b""):
            emit(raw.decode("utf-8", "replace").rstrip("\r\n"))


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


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root``, from ``/proc`` (empty where there is none)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_tree(proc: subprocess.Popen, signum: int) -> None:
    targets = set(descendants(proc.pid)) | {proc.pid}
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signum)
    for pid in targets:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


def kill_tree(proc: subprocess.Popen, first: int = signal.SIGTERM) -> None:
    """Stop ``proc`` and all its descendants: ``first``, then SIGTERM, then SIGKILL."""
    ladder = [first] + [s for s in (signal.SIGTERM,) if s != first]
    for signum in ladder:
        _signal_tree(proc, signum)
        if _tree_gone(proc, GRACE_S):
            break
    _signal_tree(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=GRACE_S)
    _reap_orphans()


def _tree_gone(proc: subprocess.Popen, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None and not descendants(proc.pid) and not _group_alive(proc.pid):
            return True
        time.sleep(0.05)
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _has_live_member(pgid)


def _has_live_member(pgid: int) -> bool:
    """killpg(0) also succeeds for zombies; look for a member that is not one."""
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().decode("utf-8", "replace").rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _reap_orphans() -> None:
    """Collect zombies re-parented to us as subreaper (never blocks)."""
    while _subreaper:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
