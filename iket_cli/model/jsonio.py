"""Reading the small JSON files of a capture (manifests, records, configs) safely.

Every such file may come from elsewhere (a CI artifact, a colleague's capture, a fuzzer):
too deep a nesting makes Python's parser raise ``RecursionError`` and a file of gigabytes
would be read whole. :func:`parse` and :func:`read` turn both into ``ValueError``, as for
any other JSON that is not valid, so each reader has one error to name. (The traces have
readers of their own: :mod:`.trace`.)
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

#: The largest manifest, record or config iket reads (a manifest of many processes with
#: its lint findings is a few hundred KB).
MAX_BYTES = 64 << 20


class TooLarge(ValueError):
    """The file is larger than the reader takes."""


def parse(text: str | bytes) -> Any:
    """``json.loads``, raising ``ValueError`` for nesting too deep to parse as well."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to be read") from None


def is_text(value: Any) -> bool:
    """A string that can be written out: JSON can spell a lone surrogate (``\\udcff``), which
    no file or terminal takes."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class NotRegular(ValueError):
    """The path is a FIFO, a device or a folder: nothing iket reads as a file."""


def read(path: str | os.PathLike, limit: int = MAX_BYTES) -> Any:
    """The JSON value in ``path``, read only if it is a regular file (a link to one is followed:
    a FIFO would block the reader forever and ``/dev/zero`` never ends, so both are
    :class:`NotRegular`) of at most ``limit`` bytes. Raises
    ``OSError`` as ``open`` does, ``ValueError`` (:class:`TooLarge` for a file over ``limit``)
    for anything that is not a JSON document iket can hold.
    """
    with open_regular(path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"larger than {limit >> 20} MiB")
    return parse(data)


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file (a link to one is
    followed); :class:`NotRegular` for a FIFO (opened without blocking, never read), a device
    or a folder. The raw capture's data and logs are read through it too."""
    fd = os.open(Path(path), os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegular("not a regular file")
    return open(fd, "rb")
