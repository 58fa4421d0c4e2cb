"""``iket export``: a capture's tables (:mod:`iket_cli.analysis.tables`) as Parquet or CSV
files, one per table, each written under a temporary name beside its final one and renamed
into place when whole."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..analysis import tables as tables_mod
from ..errors import UsageError
from ..model import atomic, outputs
from ..model.reading import open_capture
from ..model.vocab import EXPORT_FORMATS, TABLE_NAMES

#: Rows gathered before they are written as one row group: a launch at a time would make a
#: row group per launch, slow to write and to read (docs/history/benchmarks.md).
BATCH_ROWS = 1 << 16


def export(location: Path, out_dir: Path, fmt: str = "parquet") -> list[Path]:
    """Write each table of ``location`` into ``out_dir`` (created); the files written.

    The tables are built a piece (a launch) at a time and written in batches of about
    :data:`BATCH_ROWS` rows, so memory holds a batch of each table, not the whole capture;
    each file appears under its name when whole, and nothing temporary is left on failure.
    """
    if fmt not in EXPORT_FORMATS:
        raise UsageError(f"unknown --format {fmt!r}", hint=f"use one of {', '.join(EXPORT_FORMATS)}")
    # one absolute path from here on: pyarrow would expand a folder named '~' to $HOME
    out_dir = outputs.check_folder(Path.cwd() / out_dir, what="export folder")
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is a file", hint="give a directory for the tables")
    pieces = tables_mod.chunks(open_capture(location))
    first = next(pieces, None)  # the traces are read (or refused) before any file is made
    out_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        tables = {name: _Table(stack, out_dir / f"{name}.{fmt}", fmt) for name in TABLE_NAMES}
        if first is not None:
            tables[first[0]].add(first[1])
        for name, piece in pieces:
            tables[name].add(piece)
        for table in tables.values():
            table.close()
    return [table.path for table in tables.values()]


class _Table:
    """One table's file: pieces gathered into batches, written to a temporary file that
    becomes ``path`` when the ``ExitStack`` ends well (see :func:`atomic.temporary_beside`)."""

    def __init__(self, stack: contextlib.ExitStack, path: Path, fmt: str) -> None:
        self.path, self.fmt = path, fmt
        self.temporary = stack.enter_context(atomic.temporary_beside(path))
        self.writer = None
        self.pending: list = []
        self.rows = 0
        stack.callback(self._release)

    def add(self, piece) -> None:
        self.pending.append(piece)
        self.rows += piece.num_rows
        if self.rows >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if not self.pending:
            return
        batch = pa.concat_tables(self.pending, promote_options="permissive")
        self.pending, self.rows = [], 0
        if self.fmt != "parquet":
            batch = batch.cast(_plain(batch.schema))
        if self.writer is None:
            self.writer = _writer(self.temporary, batch.schema, self.fmt)
        self.writer.write_table(batch)

    def close(self) -> None:
        """The rest written, and the file closed (a table with no piece: an empty file)."""
        self._flush()
        if self.writer is None:
            self.writer = _writer(self.temporary, _empty_schema(), self.fmt)
        self._release()

    def _release(self) -> None:
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()


def _empty_schema():
    import pyarrow as pa

    return pa.schema([pa.field("capture", pa.string())])


def _writer(path: Path, schema, fmt: str):
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetWriter(str(path), schema, compression="zstd")
    import pyarrow.csv as pcsv

    return pcsv.CSVWriter(str(path), _plain(schema))


def _plain(schema):
    """The schema with dictionary columns as their values: CSV holds values, not codes."""
    import pyarrow as pa

    return pa.schema(
        [pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type) for f in schema]
    )
