"""A child's whole process tree: finding every descendant, signalling and reaping them.

A workload may start processes of its own, and those may start their own session, so
the tree is every process in the child's process group plus every descendant found in
``/proc``. The CLI makes itself a child subreaper, so that orphans stay descendants and
cannot escape a kill.

When the CLI itself is gone (``kill -9``, the OOM killer), its tree is no longer its tree:
orphans re-parent to init. So every process of a capture also carries a marker in its
environment (``IKET_CLI_RUN=<token>``, inherited by everything the passes start), and
:func:`kill_capture` finds them by it, from the watchdog or from the next capture. A process
started with an empty environment (``env={}``) in a session of its own carries no marker:
while the passes run, the CLI records its descendants by pid and start time (a pair that
names one process for good) in the staging folder every :data:`RECORD_S` seconds
(:class:`Recorder`), and :func:`kill_capture` stops those too. (A process that detaches and
sheds its environment within one interval of the CLI's death can still escape; a cgroup
would close that gap, where one can be had.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

#: Seconds a stopped tree gets after SIGINT and after SIGTERM before SIGKILL.
GRACE_S = 3.0

_PR_SET_CHILD_SUBREAPER = 36
_subreaper = False


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Make this process get SIGKILL when ``parent`` (the thread that started it) dies.

    For iket's own workers (a decode worker): set at their start, so a killed CLI leaves
    none running. If the parent is already gone, exit now.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


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


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()


def _pids() -> list[int]:
    if not os.path.isdir("/proc"):
        return []
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root``, from ``/proc`` (empty where there is none)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def signal_tree(root: int, signum: int) -> None:
    """Send ``signum`` to ``root``'s process group and to each of its descendants."""
    targets = set(descendants(root)) | {root}
    with contextlib.suppress(OSError):
        os.killpg(root, signum)
    for pid in targets:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


#: The environment variable that marks every process of one capture (value: the token).
MARK_ENV = "IKET_CLI_RUN"


def marked(token: str) -> list[int]:
    """The live processes whose environment carries ``IKET_CLI_RUN=<token>`` (not this one)."""
    needle = f"{MARK_ENV}={token}".encode()
    found = []
    for pid in _pids():
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            fields = _stat_fields(pid)
            if fields and fields[0] != "Z":
                found.append(pid)
    return found


#: Seconds between two records of the capture's processes (:class:`Recorder`).
RECORD_S = 0.2


class Recorder:
    """Appends each new descendant of this process, ``pid start_time`` a line, to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: set[tuple[int, int]] = set()
        self._last = 0.0

    def alive(self) -> list[int]:
        """The recorded processes still alive (their start time unchanged)."""
        return [pid for pid, started in sorted(self._seen) if start_time(pid) == started]

    def update(self) -> None:
        """Record what is new, at most every :data:`RECORD_S` seconds; never raises."""
        now = time.monotonic()
        if now - self._last < RECORD_S:
            return
        self._last = now
        found = {(pid, started) for pid in descendants(os.getpid()) if (started := start_time(pid))}
        new = found - self._seen
        if new:
            with contextlib.suppress(OSError), open(self.path, "a") as handle:
                handle.writelines(f"{pid} {started}\n" for pid, started in sorted(new))
            self._seen |= new


def recorded(path: Path) -> list[int]:
    """The live processes :class:`Recorder` wrote to ``path`` (their start time unchanged:
    a pid that was reused since names another process, which is left alone)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    alive = []
    for line in lines:
        words = line.split()
        if len(words) == 2 and all(w.isdigit() for w in words):
            pid, started = int(words[0]), int(words[1])
            if pid != os.getpid() and start_time(pid) == started:
                alive.append(pid)
    return alive


def kill_capture(token: str, pids: list[int], within: float = 5.0) -> list[int]:
    """SIGKILL every process of a capture: marked with ``token``, or one of ``pids`` (what a
    :class:`Recorder` recorded, still alive); until none is left. The pids killed."""
    killed = kill_marked(token, within)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    reap_orphans()
    return killed


def kill_marked(token: str, within: float = 5.0) -> list[int]:
    """SIGKILL every process marked with ``token`` until none is left; the pids killed."""
    killed: list[int] = []
    deadline = time.monotonic() + within
    while (found := marked(token)) and time.monotonic() < deadline:
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        killed += [pid for pid in found if pid not in killed]
        time.sleep(0.05)
        reap_orphans()
    return killed


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, ``/proc/PID/stat`` field 22); None if gone.

    A pid and its start time name one process for good: a pid can be reused, the pair not.
    """
    fields = _stat_fields(pid)
    if not fields or len(fields) < 20 or fields[0] == "Z":
        return None
    return int(fields[19])


def kill_tree(proc: subprocess.Popen, first: int = signal.SIGTERM) -> None:
    """Stop ``proc`` and all its descendants: ``first``, then SIGTERM, then SIGKILL."""
    ladder = [first] + [s for s in (signal.SIGTERM,) if s != first]
    for signum in ladder:
        signal_tree(proc.pid, signum)
        if _tree_gone(proc, GRACE_S):
            break
    signal_tree(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=GRACE_S)
    reap_orphans()


def _tree_gone(proc: subprocess.Popen, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None and not descendants(proc.pid) and not group_alive(proc.pid):
            return True
        time.sleep(0.05)
    return False


def group_alive(pgid: int) -> bool:
    """Whether a process group has a member that is not a zombie."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return any(
        fields is not None and len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z"
        for fields in map(_stat_fields, _pids())
    )


def reap_orphans() -> None:
    """Collect zombies re-parented to us as subreaper (never blocks)."""
    while _subreaper:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
