"""A child's whole process tree: finding every descendant, signalling and reaping them.

A workload may start processes of its own, and those may start their own session, so
the tree is every process in the child's process group plus every descendant found in
``/proc``. The CLI makes itself a child subreaper, so that orphans stay descendants and
cannot escape a kill.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time

#: Seconds a stopped tree gets after SIGINT and after SIGTERM before SIGKILL.
GRACE_S = 3.0

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
