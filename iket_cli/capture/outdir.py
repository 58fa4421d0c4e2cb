"""Output directories that are never lost or clobbered by accident: checking DIR, locking it.

* DIR is checked before anything runs: a previous capture needs ``--clobber``; anything
  else that is not ours (a non-empty folder without a manifest, a file, a symlink, ``/``,
  the home directory, the working directory or one of its ancestors, a path under a file)
  is refused outright, and so is a name too long to leave room for ``DIR.failed``.
* A lock file beside DIR makes a second concurrent capture into DIR (or a decode of it)
  fail at once.
* The capture itself is made in a staging directory beside DIR (:mod:`.staging`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from pathlib import Path

from ..errors import OutputDirError
from ..model.manifest import is_capture
from ..model.vocab import FAILED_SUFFIX, MANIFEST_NAME

LOCK_SUFFIX = ".iket.lock"


def check(path: Path, *, cwd: Path, clobber: bool) -> Path:
    """Refuse an unsafe or occupied output directory; return it made absolute.

    ``cwd`` is the workload's working directory, protected like the CLI's own.

    Raises :class:`OutputDirError` (exit 2). Nothing on disk is changed.
    """
    absolute = Path(os.path.abspath(path.expanduser()))  # relative to where iket was started
    _check_parents(path, absolute)
    _check_name(path, absolute)
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


def _check_parents(path: Path, absolute: Path) -> None:
    """A path under a file can never be made: say which file is in the way."""
    for parent in absolute.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise OutputDirError(
                    f"cannot make output directory {path}: {parent} is a file, not a directory",
                    hint="pass --output-dir with a path whose parents are directories",
                )
            return


def name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system of ``folder`` or its nearest existing
    ancestor takes."""
    for candidate in (folder, *folder.parents):
        if candidate.is_dir():
            try:
                return os.pathconf(candidate, "PC_NAME_MAX")
            except (OSError, ValueError):
                break
    return 255


def _check_name(path: Path, absolute: Path) -> None:
    """DIR's name must leave room for ``DIR.failed``, where a failed attempt's evidence goes,
    and be text: run-iket and the injection library write the paths of a capture as UTF-8
    (in JSON), which bytes that are not UTF-8 cannot be."""
    try:
        str(absolute).encode("utf-8")
    except UnicodeEncodeError:
        raise OutputDirError(
            f"output directory {os.fsencode(path)!r} is not a UTF-8 path, which run-iket cannot write",
            hint="pass --output-dir with a name (and parents) in UTF-8",
        ) from None
    limit = name_max(absolute.parent) - len(FAILED_SUFFIX.encode())
    size = len(os.fsencode(absolute.name))
    if size > limit:
        raise OutputDirError(
            f"output directory name {absolute.name[:24]}... is {size} bytes; at most {limit} fit, "
            f"so that a failed attempt can keep its evidence in {absolute.name[:8]}...{FAILED_SUFFIX}",
            hint=f"pass --output-dir with a name of at most {limit} characters",
        )


def hidden(output_dir: Path, suffix: str) -> Path:
    """``.NAME<suffix>`` beside DIR: a lock or staging name that always fits the file system.

    Where the whole name would be too long, NAME is cut and a hash of it added, so two
    long names still give two paths. DIR is made absolute first: ``.`` and ``..`` have no name
    of their own (``iket postprocess .`` is a normal call).
    """
    output_dir = Path(os.path.abspath(output_dir))
    name = f".{output_dir.name}{suffix}"
    limit = name_max(output_dir.parent)
    if len(os.fsencode(name)) <= limit:
        return output_dir.with_name(name)
    digest = hashlib.sha1(os.fsencode(output_dir.name)).hexdigest()[:12]
    room = limit - len(suffix.encode()) - len(digest) - 2
    head = os.fsdecode(os.fsencode(output_dir.name)[:room].decode("utf-8", "ignore").encode())
    return output_dir.with_name(f".{head}~{digest}{suffix}")


def _protected(cwd: Path) -> list[tuple[Path, str]]:
    places = [(Path("/"), "the root directory"), (Path.home().resolve(), "the home directory")]
    for folder in {Path.cwd().resolve(), cwd.resolve()}:
        places.append((folder, "the working directory"))
    return places


class Lock:
    """An exclusive, non-blocking lock on one output directory, held for a whole capture.

    The lock file sits beside DIR (DIR itself may not exist yet) and is removed on release;
    a holder re-checks after locking that the file it locked is still the one on disk. It is
    named after DIR's real path, so that two commands naming one folder by two paths (a
    symlink, ``..``) take one lock; it is never opened through a symlink (someone else's
    file planted under its name would be overwritten).
    """

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        self.path = hidden(Path(os.path.realpath(output_dir)), LOCK_SUFFIX)
        self._fd: int | None = None

    def acquire(self) -> Lock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                if holder == f" (pid {os.getpid()})":  # a window nested in one into the same folder
                    raise OutputDirError(
                        f"this process is already using {self.output_dir}: a capture or window into it "
                        "is open here",
                        hint="give the inner window a folder of its own",
                    ) from None
                raise OutputDirError(
                    f"another iket command is using {self.output_dir}{holder}: a capture into it, "
                    "or a decode of it",
                    hint="wait for it to finish, or pass --output-dir with another directory",
                ) from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # the holder removed it between our open and our lock: retry
        self._fd = fd
        try:  # the holder's pid, for the message of a command that finds DIR locked
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:  # a full disk: the lock holds without it; nothing is left behind
            self.release()
            raise
        return self

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as error:
            if error.errno != errno.ELOOP:
                raise
        raise OutputDirError(
            f"the lock file {self.path} is a symlink, which iket never writes through",
            hint=f"remove it (rm {self.path}) if nobody else needs it, or pass --output-dir elsewhere",
        )

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
        on_disk = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)
