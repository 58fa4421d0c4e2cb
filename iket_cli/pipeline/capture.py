"""The public :class:`Capture`: a capture directory as :mod:`iket_cli.model.folder` reads it,
and its tables for a notebook (``iket_cli.Capture.load(DIR).tables()``)."""

from __future__ import annotations

from typing import Any

from ..model import folder


class Capture(folder.Capture):
    """A published capture directory and its manifest (what :func:`iket_cli.profile`
    returns), with its tables as Arrow and DuckDB see them (docs/schema.md)."""

    def tables(self) -> dict[str, Any]:
        """The six tables (processes, kernels, launches, warps, ranges, markers) as
        ``pyarrow.Table``; ``.to_pandas()`` on one gives a dataframe. Needs the ``sql`` extra."""
        from ..analysis import tables  # not on iket profile's way: only a reader of tables needs it

        return tables.build(self.output_dir)

    def to_duckdb(self, *, allow_files: bool = False):
        """An in-memory DuckDB connection with the tables registered under their names:
        ``capture.to_duckdb().sql("SELECT ...").df()``; confined to them as ``iket sql`` is,
        unless ``allow_files`` (to ``COPY`` a result to a file, say). Needs the ``sql`` extra."""
        from ..analysis import sql

        return sql.connect(self.tables(), allow_files=allow_files)
