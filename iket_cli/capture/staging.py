"""Where one capture attempt is made: a private folder beside DIR, published atomically.

* The capture is made in ``.DIR.iket-staging-<token>`` beside DIR and published with one
  atomic rename (an atomic exchange where DIR already holds a capture and ``--clobber``
  was given), so a failed, refused or interrupted run never changes DIR.
* A failed attempt leaves its evidence in ``DIR.failed/``, replaced by the next failure; a
  ``DIR.failed`` that is not such evidence (a capture that succeeded, named so by hand or by
  ``iket run``'s job of that name; anything not iket's) is never replaced.
* Each staging folder records its owner (pid and start time) and its token, the marker
  every process of the capture carries (see :mod:`.tree`). A staging folder whose owner
  died without cleaning up (``kill -9`` of the CLI and of its watchdog together, a
  preempted job) is found by the next capture into DIR, which stops the processes still
  marked with its token and removes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import OutputDirError
from ..model import jsonio
from ..model.manifest import is_capture, is_evidence
from ..model.vocab import EXTRACT_DIR, FAILED_SUFFIX, LOG_NAME, WINDOW_DIR
from ..system import tree
from .outdir import hidden

STAGING_SUFFIX = ".iket-staging-"
#: The capture's processes by pid and start time (:class:`~iket_cli.system.tree.Recorder`).
PIDS_NAME = "processes.pids"
TOKEN_BYTES = 4  # 8 hex digits
OWNER_NAME = "owner.json"
CAPTURE_NAME = "capture"


class Staging:
    """A private directory beside DIR where one capture attempt is made.

    ``capture_dir`` is handed to run-iket as its output directory (run-iket insists on
    creating it); ``log_path`` collects the console log until it moves into the result.
    Used as a context manager: whatever was neither published nor kept as evidence is
    removed on the way out, however the block ends.
    """

    def __init__(self, output_dir: Path, root: Path, token: str) -> None:
        self.output_dir = output_dir
        self.root = root
        self.token = token
        self.capture_dir = root / CAPTURE_NAME
        self.log_path = root / LOG_NAME
        #: Records the capture's processes while its passes run (for :meth:`kill_processes`).
        self.recorder = tree.Recorder(root / PIDS_NAME)

    @classmethod
    def create(cls, output_dir: Path) -> Staging:
        """A new staging folder beside ``output_dir``, owned by this process."""
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        while True:
            token = secrets.token_hex(TOKEN_BYTES)
            root = hidden(output_dir, STAGING_SUFFIX + token)
            try:
                root.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        owner = {"pid": os.getpid(), "started": tree.start_time(os.getpid()), "token": token}
        try:
            (root / OWNER_NAME).write_text(json.dumps(owner))
        except OSError:  # a full disk: no staging folder is left behind
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(output_dir, root, token)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()  # a no-op once publish() or fail() moved the capture away

    def finalize(self) -> Path:
        """Make sure the capture folder exists and holds the logs (``iket.log``, and
        ``warm.log`` where a warm standby ran); return the folder."""
        self.capture_dir.mkdir(exist_ok=True)
        for log in self.root.glob("*.log"):
            os.replace(log, self.capture_dir / log.name)
        for kept in (EXTRACT_DIR, WINDOW_DIR):  # saved calls, windows (beside: run-iket makes capture/)
            if (self.root / kept).is_dir():
                os.replace(self.root / kept, self.capture_dir / kept)
        return self.capture_dir

    def publish(self, hold: Callable[[], None] = lambda: None, *, clobber: bool = True) -> Path:
        """Move the capture into DIR atomically, replacing a previous capture there where
        ``clobber``; without it, a capture that appeared at DIR while this one was made (DIR
        was free when it began) is kept and this one is not published.

        ``hold`` is called just before the move: from then on the capture counts as
        published (see :class:`~iket_cli.system.signals.Publishing`).
        """
        capture = self.finalize()
        dest = self.output_dir
        if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
            raise OutputDirError(
                f"{dest} changed during the capture and is no longer a directory; the new capture "
                "was not published",
                hint="remove what took its place, or capture again with another --output-dir",
            )
        if not clobber and dest.exists() and any(dest.iterdir()):
            raise OutputDirError(
                f"{dest} was free when the capture began and holds a capture now (another run "
                "published there meanwhile); it is kept, the new capture was not published",
                hint="capture again with another --output-dir, or with --clobber to replace it",
            )
        hold()
        if dest.exists():
            if not (is_capture(dest) or not any(dest.iterdir())):
                raise OutputDirError(
                    f"{dest} changed during the capture and is no longer an iket capture; the new "
                    "capture was not published",
                    hint="move what is in it away, or capture again with another --output-dir",
                )
            _exchange(capture, dest)  # capture now holds the previous DIR
        else:
            os.rename(capture, dest)
        self.discard()
        return dest

    def fail(self) -> Path | None:
        """Keep this attempt's evidence in ``DIR.failed/``; return where it went, or None
        where ``DIR.failed`` holds something that is not a failed attempt's evidence (never
        replaced: the evidence is then dropped with the staging folder)."""
        capture = self.finalize()
        failed = failed_dir(self.output_dir)
        if failed.is_symlink() or (failed.exists() and not (is_evidence(failed) or _empty_dir(failed))):
            return None
        if failed.exists():
            _exchange(capture, failed)
        else:
            os.rename(capture, failed)
        self.discard()
        return failed

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def kill_processes(self) -> list[int]:
        """Stop whatever of the capture still runs (marked, or recorded while it ran)."""
        return tree.kill_capture(self.token, self.recorder.alive())


def _empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def failed_dir(output_dir: Path) -> Path:
    """``DIR.failed``: where a failed attempt's evidence goes."""
    return output_dir.with_name(output_dir.name + FAILED_SUFFIX)


@dataclass(frozen=True)
class Stale:
    """A staging folder left by a capture whose owner is gone."""

    root: Path
    token: str
    bytes: int
    owner_pid: int | None
    killed: list[int]


def remove_stale(output_dir: Path) -> list[Stale]:
    """Remove the staging folders of DIR whose owner died; stop their processes first.

    Call it holding DIR's lock: then no live capture into DIR can own one.
    """
    found = []
    for root in _stagings(output_dir):
        owner = _owner(root)
        if owner is not None and _alive(owner):
            continue  # a live owner without the lock: not ours to touch
        token = root.name[-2 * TOKEN_BYTES :]
        killed = tree.kill_capture(token, tree.recorded(root / PIDS_NAME))
        size = _size(root)
        shutil.rmtree(root, ignore_errors=True)
        found.append(Stale(root, token, size, (owner or {}).get("pid"), killed))
    return found


def abandoned(output_dir: Path) -> Path | None:
    """The newest staging folder of DIR whose owner died (None: none): what a process that died
    inside a window left, for whoever keeps it as evidence. Call it holding DIR's lock."""
    left = [root for root in _stagings(output_dir) if not _alive(_owner(root) or {})]
    return max(left, key=lambda root: root.stat().st_mtime) if left else None


def _stagings(output_dir: Path) -> list[Path]:
    """Staging folders of DIR: their names differ only in the token."""
    example = hidden(output_dir, STAGING_SUFFIX + "0" * 2 * TOKEN_BYTES)
    prefix = example.name[: -2 * TOKEN_BYTES]
    parent = output_dir.parent
    if not parent.is_dir():
        return []
    return [
        parent / name
        for name in sorted(os.listdir(parent))
        if name.startswith(prefix)
        and _is_token(name[len(prefix) :])
        and (parent / name).is_dir()
        and not (parent / name).is_symlink()
    ]


def _is_token(text: str) -> bool:
    return len(text) == 2 * TOKEN_BYTES and all(c in "0123456789abcdef" for c in text)


def _owner(root: Path) -> dict | None:
    try:
        owner = jsonio.parse((root / OWNER_NAME).read_text())
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def _alive(owner: dict) -> bool:
    pid, started = owner.get("pid"), owner.get("started")
    return isinstance(pid, int) and started is not None and tree.start_time(pid) == started


def _size(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories atomically (Linux renameat2); fall back to two renames."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        if rc == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(b))
    aside = a.with_name(a.name + ".swap")
    os.rename(b, aside)
    try:
        os.rename(a, b)
    except OSError:
        os.rename(aside, b)
        raise
    os.rename(aside, a)
