"""One decode: a raw capture through NVIDIA's ``RawCaptureDecoder`` into run-iket's artifacts.

The JSON is byte-for-byte what run-iket writes (several launches: exported launch by
launch and merged, see :mod:`.split.join`); a part of a split Perfetto export is spooled
with what its join needs (:mod:`.split.pftrace_parts`); the ``.pftrace.gz`` uses gzip level 6 (same
size as run-iket's level 9, a tenth of the time) and a zero timestamp, so it is
reproducible. Every file is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..model.vocab import JSON_EXPORT
from .split import join
from .tasks import Outcome, Task, columns_name, pftrace_beside

if TYPE_CHECKING:
    from .split.pftrace_parts import Part

GZIP_LEVEL = 6


def preload() -> None:
    """Import the decoder and what a decode runs (numpy among it) now, e.g. in a thread
    while the passes run or before a fork, so no decode waits for its import. Not at this
    module's import: the CLI that only hands a split export to its workers has no use for
    numpy (docs/benchmarks.md, "The Perfetto export's moves, and less to start")."""
    available()
    from .split import columns, pftrace_parts  # noqa: F401


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


def decode(task: Task, hold: Callable[[str, Part], None] | None = None) -> Outcome:
    """Decode one task in this process (its inputs already checked by ``tasks.missing_input``).
    ``hold``: given a part of a split Perfetto export (its spool's name and the part), to keep
    it in this process for its move, instead of spooling it to files."""
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


def _export(task: Task, hold: Callable[[str, Part], None] | None = None) -> list[str]:
    decoder_cls = decoder_class()
    if task.export == JSON_EXPORT and not task.part:
        out = task.out_dir / task.outputs()[0]
        tmp = temporary(out)
        if join.export_json(task.raw, tmp, decoder_cls):  # by launches: much faster
            os.replace(tmp, out)
            return [out.name]
    decoder = decoder_cls(str(task.raw))
    try:
        if task.part and task.export == JSON_EXPORT:
            return _export_part(task, decoder)
        if task.part:  # a launch, or a chunk of one, of a split Perfetto export
            from .split import pftrace_parts

            spooled = task.out_dir / task.outputs()[0]
            part = pftrace_parts.exported(decoder, chunk=bool(task.chunk))
            if hold is not None:
                hold(str(spooled), part)
            else:
                pftrace_parts.spool(part, spooled, *pftrace_beside(spooled))
            return task.outputs()
        if task.export == JSON_EXPORT:
            text = decoder.export_decoded_json()
            decoder.close()
            return [_write_text(task.out_dir / task.outputs()[0], text)]
        trace = decoder.export_perfetto_trace()
    finally:
        decoder.close()
    return _write_perfetto(task, trace)


def _export_part(task: Task, decoder) -> list[str]:
    """One launch of a split JSON export, or a chunk of one: spooled with what the merge
    and the report will need of it (its indices, which a chunk's stitch needs whatever its
    launch; its columns, when the report reads the trace back)."""
    from .split import columns

    spooled = task.out_dir / task.outputs()[0]
    join.spool(decoder, spooled, find_indices=task.part[0] > 0 or task.chunk is not None)
    if columns.wanted(task.formats):
        columns.keep(spooled, spooled.with_name(columns_name(spooled.name)))
    return task.outputs()


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
        join.write_slices(handle, text)
    os.replace(tmp, path)
    return path.name


def _write_bytes(path: Path, data: bytes) -> str:
    tmp = temporary(path)
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path.name
