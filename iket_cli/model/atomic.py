"""Writing a file whole or not at all, without following anything planted beside it.

A report, a diff page, an export or a manifest is written under a temporary name in the
target's folder and renamed over the target once complete, so a reader never sees half a
file and a failure leaves the previous one. The temporary name is random and created
exclusively, never following a symlink (``tempfile.mkstemp``: ``O_CREAT | O_EXCL |
O_NOFOLLOW``): a fixed name such as ``.report.html.tmp`` in a shared folder could be a
symlink planted by someone else, and writing through it would overwrite their target. The
rename replaces a symlink at the target itself, never the file it points to. The temporary
is removed on any failure, a full disk or an interrupt included.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

#: The suffix of every temporary file iket writes (a leftover of a killed writer is named so).
TMP_SUFFIX = ".tmp"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: The mode of a new file, as ``open`` would make it (mkstemp makes its files private).
FILE_MODE = 0o666 & ~_umask()


@contextlib.contextmanager
def replacing(path: str | os.PathLike, mode: str = "wb", **options) -> Iterator[IO]:
    """An open temporary file beside ``path``, renamed over ``path`` when the block ends well,
    removed when it does not. ``mode`` and ``options`` are ``open``'s (``"w"``,
    ``encoding="utf-8"``)."""
    with _beside(path) as (fd, _), open(fd, mode, **options) as handle:
        yield handle


@contextlib.contextmanager
def temporary_beside(path: str | os.PathLike) -> Iterator[Path]:
    """A fresh, empty temporary file beside ``path`` for a writer that takes a path (pyarrow),
    renamed over ``path`` when the block ends well, removed when it does not."""
    with _beside(path) as (fd, temporary):
        os.close(fd)
        yield Path(temporary)


@contextlib.contextmanager
def _beside(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """A new file beside ``path`` (random name, created exclusively, never through a symlink),
    open as ``fd``; renamed over ``path`` when the block ends well, removed when it does not.
    An OSError names ``path`` (see :func:`_named`)."""
    target = Path(path)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TMP_SUFFIX)
    try:
        os.fchmod(fd, FILE_MODE)
        yield fd, temporary
        os.replace(temporary, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise _named(error, target) from None
        raise


def _named(error: OSError, target: Path) -> OSError:
    """``error`` naming the file it was writing (a write's own error names none, and a full
    disk must be named by the disk that holds the target). A writer that gives no errno
    (pyarrow says "No space left on device" in words) gets it from its words."""
    code = error.errno
    if code is None:
        text = str(error)
        code = next((c for c in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) if os.strerror(c) in text), None)
    if code is None or error.filename:
        return error
    return OSError(code, error.strerror or os.strerror(code), str(target))


def write(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole; return ``path``."""
    with replacing(path, "wb") as handle:
        handle.write(data.encode("utf-8", "replace") if isinstance(data, str) else data)
    return Path(path)
