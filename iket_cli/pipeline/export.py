"""``iket export``: a capture's tables (:mod:`iket_cli.analysis.tables`) as Parquet or CSV
files, one per table, each written beside its final name and renamed into place."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from ..analysis import tables as tables_mod
from ..errors import UsageError
from ..model.vocab import EXPORT_FORMATS, TABLE_NAMES


def export(location: Path, out_dir: Path, fmt: str = "parquet") -> list[Path]:
    """Write each table of ``location`` into ``out_dir`` (created); the files written.

    Each table is written a piece (a launch) at a time as it is built, so memory holds one
    piece of one table, not the whole capture; each file appears under its name when whole.
    """
    if fmt not in EXPORT_FORMATS:
        raise UsageError(f"unknown --format {fmt!r}", hint=f"use one of {', '.join(EXPORT_FORMATS)}")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is a file", hint="give a directory for the tables")
    pieces = tables_mod.chunks(Path(location))
    first = next(pieces, None)  # the traces are read (or refused) before any file is made
    out_dir.mkdir(parents=True, exist_ok=True)
    writers: dict[str, tuple[Path, object]] = {}
    try:
        for name, piece in itertools.chain([first] if first else [], pieces):
            if name not in writers:
                tmp = out_dir / f".{name}.{fmt}.tmp"
                writers[name] = (tmp, _writer(tmp, piece.schema, fmt))
            writers[name][1].write_table(piece if fmt == "parquet" else piece.cast(_plain(piece.schema)))
        for name in TABLE_NAMES:  # a table with no piece at all (no launch): an empty file
            if name not in writers:
                tmp = out_dir / f".{name}.{fmt}.tmp"
                writers[name] = (tmp, _writer(tmp, _empty_schema(), fmt))
        written = []
        for name in TABLE_NAMES:
            tmp, writer = writers.pop(name)
            writer.close()
            os.replace(tmp, out_dir / f"{name}.{fmt}")
            written.append(out_dir / f"{name}.{fmt}")
        return written
    finally:
        for tmp, writer in writers.values():
            writer.close()
            tmp.unlink(missing_ok=True)


def _empty_schema():
    import pyarrow as pa

    return pa.schema([pa.field("capture", pa.string())])


def _writer(path: Path, schema, fmt: str):
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetWriter(path, schema, compression="zstd")
    import pyarrow.csv as pcsv

    return pcsv.CSVWriter(path, _plain(schema))


def _plain(schema):
    """The schema with dictionary columns as their values: CSV holds values, not codes."""
    import pyarrow as pa

    return pa.schema(
        [pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type) for f in schema]
    )
