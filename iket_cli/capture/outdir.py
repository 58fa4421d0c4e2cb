"""Output directories that are never lost or clobbered by accident.

* A capture is made in a staging directory beside DIR and published with one atomic
  rename (an atomic exchange where DIR already holds a capture and ``--clobber`` was given).
* DIR is checked before anything runs: a previous capture needs ``--clobber``; anything
  else that is not ours (a non-empty folder without a manifest, a file, a symlink, ``/``,
  the home directory, the working directory or one of its ancestors) is refused outright.
* A lock file beside DIR makes a second concurrent capture into DIR fail at once.
* A failed attempt leaves its evidence in ``DIR.failed/``, replaced by the next failure.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import OutputDirError
from ..model.manifest import is_capture
from ..model.vocab import FAILED_SUFFIX, LOG_NAME, MANIFEST_NAME


def check(path: Path, *, cwd: Path, clobber: bool) -> Path:
    """Refuse an unsafe or occupied output directory; return it made absolute.

    ``cwd`` is the workload's working directory, protected like the CLI's own.

    Raises :class:`OutputDirError` (exit 2). Nothing on disk is changed.
    """
    absolute = Path(os.path.abspath(path.expanduser()))  # relative to where iket was started
    if absolute.is_symlink():
        raise OutputDirError(
            f"output directory {path} is a symlink; refusing it even with --clobber",
            hint="pass --output-dir with a real directory",
        )
    resolved = absolute.resolve()
    for protected, what in _protected(cwd):
        if resolved == protected or resolved in protected.parents:
            relation = "is" if resolved == protected else "contains"
            raise OutputDirError(
                f"output directory {path} {relation} {what} ({protected}); refusing it even with --clobber",
                hint="pass --output-dir with a dedicated directory, e.g. --output-dir ./iket-run",
            )
    if not absolute.exists():
        return absolute
    if not absolute.is_dir():
        raise OutputDirError(
            f"output directory {path} exists and is not a directory; refusing it even with --clobber",
            hint="pass --output-dir with another path",
        )
    if is_capture(absolute):
        if not clobber:
            raise OutputDirError(
                f"output directory {path} holds a previous capture",
                hint="pass --clobber to replace it once the new capture succeeds, "
                "or --output-dir with a new directory",
            )
        return absolute
    if any(absolute.iterdir()):
        raise OutputDirError(
            f"output directory {path} is not empty and is not an iket capture (no "
            f"{MANIFEST_NAME}); refusing to replace it even with --clobber",
            hint="pass --output-dir with a new or empty directory",
        )
    return absolute


def _protected(cwd: Path) -> list[tuple[Path, str]]:
    places = [(Path("/"), "the root directory"), (Path.home().resolve(), "the home directory")]
    for folder in {Path.cwd().resolve(), cwd.resolve()}:
        places.append((folder, "the working directory"))
    return places


class Lock:
    """An exclusive, non-blocking lock on one output directory, held for a whole capture.

    The lock file sits beside DIR (DIR itself may not exist yet) and is removed on release;
    a holder re-checks after locking that the file it locked is still the one on disk.
    """

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        self.path = output_dir.with_name(f".{output_dir.name}.iket.lock")
        self._fd: int | None = None

    def acquire(self) -> Lock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise OutputDirError(
                    f"another iket capture into {self.output_dir} is running{holder}",
                    hint="wait for it to finish, or pass --output-dir with another directory",
                ) from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # the holder removed it between our open and our lock: retry
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> Lock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


class Staging:
    """A private directory beside DIR where one capture attempt is made.

    ``capture_dir`` is handed to run-iket as its output directory (run-iket insists on
    creating it); ``log_path`` collects the console log until it moves into the result.
    Used as a context manager: whatever was neither published nor kept as evidence is
    removed on the way out, however the block ends.
    """

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.iket-staging-", dir=output_dir.parent))
        self.capture_dir = self.root / "capture"
        self.log_path = self.root / LOG_NAME

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
        return self.capture_dir

    def publish(self) -> Path:
        """Move the capture into DIR atomically, replacing a previous capture there."""
        capture = self.finalize()
        dest = self.output_dir
        if dest.exists() and not dest.is_symlink() and dest.is_dir():
            if not (is_capture(dest) or not any(dest.iterdir())):
                raise OutputDirError(
                    f"{dest} changed during the capture and is no longer an iket capture; "
                    f"the new capture was left in {self.root}",
                    hint="move it by hand",
                )
            _exchange(capture, dest)  # capture now holds the previous DIR
        else:
            os.rename(capture, dest)
        self.discard()
        return dest

    def fail(self) -> Path:
        """Keep this attempt's evidence in ``DIR.failed/``; return where it went."""
        capture = self.finalize()
        failed = self.output_dir.with_name(self.output_dir.name + FAILED_SUFFIX)
        if failed.is_symlink() or (failed.exists() and not is_capture(failed)):
            return self.root  # never delete something that is not ours: leave it in staging
        if failed.exists():
            _exchange(capture, failed)
        else:
            os.rename(capture, failed)
        self.discard()
        return failed

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


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
