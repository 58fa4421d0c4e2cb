"""One decode: a raw capture through NVIDIA's ``RawCaptureDecoder`` into run-iket's artifacts.

The JSON is byte-for-byte what run-iket writes (several launches: exported launch by
launch and merged by the JSON wing, :mod:`.split`); a part of a split export is exported
by its wing; the ``.pftrace.gz`` uses gzip level 6 (same size as run-iket's level 9, a
tenth of the time) and a zero timestamp, so it is reproducible. Every file is written
under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..model.vocab import JSON_EXPORT
from ..system.filesystem import write_slices
from . import split
from .tasks import Outcome, Task

if TYPE_CHECKING:
    from typing import Any

GZIP_LEVEL = 6


def preload() -> None:
    """Import the decoder and what a decode runs (numpy among it) now, e.g. in a thread
    while the passes run or before a fork, so no decode waits for its import. Not at this
    module's import: the CLI that only hands a split export to its workers has no use for
    numpy (docs/history/benchmarks.md, "The Perfetto export's moves, and less to start")."""
    available()
    split.preload()


def available() -> bool:
    """Whether NVIDIA's decoder can be imported into this process."""
    try:
        decoder_class()
    except ImportError:
        return False
    return True


def decoder_class():
    """``iket.RawCaptureDecoder``, importable even with libs-base alone (see toolchain)."""
    try:
        from iket import RawCaptureDecoder
    except ImportError:
        from ..system.toolchain import own_distribution

        folder = own_distribution()[1]
        if not folder or folder in sys.path:
            raise
        sys.path.insert(0, folder)
        from iket import RawCaptureDecoder
    return RawCaptureDecoder


def decode(task: Task, hold: Callable[[str, Any], None] | None = None) -> Outcome:
    """Decode one task in this process (its inputs already checked by ``tasks.missing_input``).
    ``hold``: given a part of a split export (its spool's name and the part), to keep it in
    this process for its move, where its wing keeps parts, instead of spooling it to files."""
    start = time.monotonic()
    try:
        written = _export(task, hold)
    except OSError as error:  # a full disk, a folder that cannot be written
        for path in _temporaries(task):
            path.unlink(missing_ok=True)
        message = f"{error.strerror or error} writing {error.filename or task.out_dir}"
        return Outcome(task, time.monotonic() - start, error=message, errno=error.errno)
    except Exception as error:  # the C++ decoder raises RuntimeError/ValueError variants
        return Outcome(task, time.monotonic() - start, error=f"{task.raw}: {error}")
    return Outcome(task, time.monotonic() - start, written=written)


def _temporaries(task: Task) -> list[Path]:
    return [temporary(task.out_dir / name) for name in task.outputs()]


def temporary(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place (``.NAME.tmp`` beside it)."""
    return path.with_name(f".{path.name}.tmp")


def _export(task: Task, hold: Callable[[str, Any], None] | None = None) -> list[str]:
    decoder_cls = decoder_class()
    if not task.part:
        out = task.out_dir / task.outputs()[0]
        tmp = temporary(out)
        if split.wing(task.export).export_whole(task.raw, tmp, decoder_cls):  # by launches: faster
            os.replace(tmp, out)
            return [out.name]
    decoder = decoder_cls(str(task.raw))
    try:
        if task.part:  # a launch, or a chunk of one, of a split export
            return split.wing(task.export).export_part(task, decoder, hold)
        if task.export == JSON_EXPORT:
            text = decoder.export_decoded_json()
            decoder.close()
            return [_write_text(task.out_dir / task.outputs()[0], text)]
        trace = decoder.export_perfetto_trace()
    finally:
        decoder.close()
    return _write_perfetto(task, trace)


def _write_perfetto(task: Task, trace: bytes) -> list[str]:
    import gzip

    written = []
    for name in task.outputs():
        data = trace if not name.endswith(".gz") else gzip.compress(trace, compresslevel=GZIP_LEVEL, mtime=0)
        written.append(_write_bytes(task.out_dir / name, data))
    return written


def _write_text(path: Path, text: str) -> str:
    """Write ``text`` as UTF-8 in slices (atomically), as run-iket's ``write_text`` would."""
    tmp = temporary(path)
    with open(tmp, "w", encoding="utf-8") as handle:
        write_slices(handle, text)
    os.replace(tmp, path)
    return path.name


def _write_bytes(path: Path, data: bytes) -> str:
    tmp = temporary(path)
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path.name
