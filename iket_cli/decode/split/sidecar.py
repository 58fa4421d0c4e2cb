"""Named numpy arrays kept in one file beside a part's spool, read back with one read.

A worker keeps what it found in its part (the indices of a JSON chunk, its columns, the
event packets of a Perfetto part) for the process that stitches or joins the parts, which
reads them one launch after another on its own thread. numpy's ``.npz`` is a zip: a part's
thirty-odd small members cost milliseconds each in zip bookkeeping and checksums, and that
was a third of a big launch's stitch (docs/history/benchmarks.md, "The stitch read"). This file is
an 8-byte magic, an 8-byte header length, a JSON header (each array's name, dtype and shape,
and a small JSON value, ``head``), then each array's bytes from an 8-byte boundary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"IKETSC01"
_ALIGN = 8


def save(path: Path, arrays: dict[str, np.ndarray], head: Any = None) -> None:
    """Keep ``arrays`` (and ``head``, anything JSON holds) in ``path``."""
    held = {name: np.ascontiguousarray(values) for name, values in arrays.items()}
    header = {
        "head": head,
        "arrays": [[name, values.dtype.str, list(values.shape)] for name, values in held.items()],
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % _ALIGN)
    with open(path, "wb") as handle:
        handle.write(MAGIC + len(text).to_bytes(8, "little") + text)
        for values in held.values():
            handle.write(memoryview(values).cast("B") if values.size else b"")
            handle.write(b"\0" * (-values.nbytes % _ALIGN))


def load(path: Path) -> tuple[dict[str, np.ndarray], Any]:
    """The arrays and ``head`` :func:`save` kept (read-only views of one read of the file).
    Raises ``ValueError`` for a file it did not write."""
    data = Path(path).read_bytes()
    if data[: len(MAGIC)] != MAGIC:
        raise ValueError(f"{Path(path).name}: not a sidecar of iket's")
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 8], "little")
    at = len(MAGIC) + 8
    header = json.loads(data[at : at + size])
    at += size
    arrays = {}
    for name, dtype, shape in header["arrays"]:
        kind = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if at + count * kind.itemsize > len(data):
            raise ValueError(f"{Path(path).name}: cut short")
        arrays[name] = np.frombuffer(data, kind, count, at).reshape(shape)
        at += count * kind.itemsize
        at += -at % _ALIGN
    return arrays, header["head"]
