"""What the file system refuses, as one-line errors: a full disk (with the space there is and
the space needed), a folder that cannot be written, a name that is too long.

An ``OSError`` from the environment is never a bug of iket's, so it never reaches the user
as a traceback: the pipeline turns the ones it meets into these errors (and keeps the
evidence it can), and ``iket_cli.cli.main`` turns any other one the same way.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..errors import DiskFullError, IketError, UsageError
from ..model.units import human_bytes

#: The errors of a full disk or a full quota (a decode worker exits with one to say so).
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
#: The errors of a path that may not be written here.
REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS)
#: Huge strings are written in slices, so a file of any size is never held twice (and each
#: slice's encoded copy reuses the memory of the one before: no fresh pages).
WRITE_SLICE = 1 << 23


#: Free bytes under which a write that failed is taken for a full disk (a library's I/O error
#: says no more than that it could not write).
NEARLY_FULL = 1 << 20


def nearly_full(folder: Path) -> bool:
    """Whether the disk holding ``folder`` has (almost) no room left."""
    free = free_bytes(folder)
    return free is not None and free < NEARLY_FULL


def is_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_FULL


def free_bytes(folder: Path) -> int | None:
    """Bytes free for this user on the file system of ``folder`` (or its nearest existing parent)."""
    for candidate in (folder, *folder.parents):
        try:
            stat = os.statvfs(candidate)
        except OSError:
            continue
        return stat.f_bavail * stat.f_frsize
    return None


def disk_full(folder: Path, needed: int | None = None, *, writing: str | None = None) -> DiskFullError:
    """The error of a full disk under ``folder``: what is free, and what was needed if known."""
    free = free_bytes(folder)
    what = f" writing {writing}" if writing else ""
    room = f" ({human_bytes(free)} free)" if free is not None else ""
    need = f"; it needs about {human_bytes(needed)}" if needed else ""
    return DiskFullError(
        f"no space left on the disk holding {folder}{what}{room}{need}",
        phase="postprocess",
        hint="free some space, or capture onto a bigger disk (-o DIR)",
    )


def from_os_error(error: OSError, folder: Path | None = None, needed: int | None = None) -> IketError:
    """One clear error for an ``OSError`` met while writing under ``folder``."""
    where = Path(error.filename) if error.filename else folder
    if error.errno in DISK_FULL:
        return disk_full(folder or (where.parent if where else Path.cwd()), needed, writing=_name(where))
    reason = error.strerror or str(error)
    if error.errno in REFUSED:
        return UsageError(
            f"cannot write {where or 'the output'}: {reason}",
            hint="choose a folder you may write to (-o DIR), or fix its permissions",
        )
    if error.errno == errno.ENAMETOOLONG:
        return UsageError(f"a path is too long for the file system: {where}", hint="use a shorter -o DIR")
    return IketError(f"{reason}: {where}" if where else reason)


def _name(path: Path | None) -> str | None:
    return path.name if path is not None else None


def write_slices(handle, text: str) -> None:
    """Write ``text`` to a text file in slices: the encoded copy never exceeds one slice."""
    for start in range(0, len(text), WRITE_SLICE):
        handle.write(text[start : start + WRITE_SLICE])


def copy_range(source, target, offset: int, count: int) -> None:
    """``count`` bytes of ``source`` from ``offset`` onto the end of ``target``, by the kernel."""
    target.flush()
    try:
        while count:
            done = os.copy_file_range(source.fileno(), target.fileno(), count, offset)
            if done <= 0:
                break
            offset, count = offset + done, count - done
        target.seek(0, os.SEEK_END)
    except OSError:
        target.seek(0, os.SEEK_END)
    if count:  # no copy_file_range here (or a short one): the rest by reads
        source.seek(offset)
        while count:
            block = source.read(min(count, WRITE_SLICE))
            target.write(block)
            count -= len(block)
