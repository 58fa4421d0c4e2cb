"""The public :class:`Capture`: a capture directory as :mod:`iket_cli.model.folder` reads it,
and its tables for a notebook (``iket_cli.Capture.load(DIR).tables()``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..model import folder

if TYPE_CHECKING:
    from ..analysis.stats import Stats


class Capture(folder.Capture):
    """A published capture directory and its manifest (what :func:`iket_cli.profile`
    returns), with its tables as Arrow and DuckDB see them (docs/schema.md)."""

    def tables(self) -> dict[str, Any]:
        """The six tables (processes, kernels, launches, warps, ranges, markers) as
        ``pyarrow.Table``; ``.to_pandas()`` on one gives a dataframe. Needs the ``sql`` extra."""
        from ..analysis import tables  # not on iket profile's way: only a reader of tables needs it
        from ..model.reading import open_capture

        return tables.build(open_capture(self.output_dir))

    def to_duckdb(self, *, allow_files: bool = False):
        """An in-memory DuckDB connection with the tables registered under their names:
        ``capture.to_duckdb().sql("SELECT ...").df()``; confined to them as ``iket sql`` is,
        unless ``allow_files`` (to ``COPY`` a result to a file, say). Needs the ``sql`` extra."""
        from ..analysis import sql

        return sql.connect(self.tables(), allow_files=allow_files)

    def ranges(self) -> list[dict[str, Any]]:
        """Per process, kernel and range: ``count``, ``total``, ``mean``, ``min``, ``p50``,
        ``p90``, ``p99``, ``max`` (ns), one flat dict each: ``pandas.DataFrame(capture.ranges())``."""
        from ..analysis import summary
        from ..model import trace as trace_mod

        rows = []
        for process in self.instrumented:
            for kernel in summary.summarize(trace_mod.load(process.trace_json)):
                for row in kernel.ranges:
                    rows.append(
                        {"process": process.info["pid_hex"], "kernel": kernel.kernel, "range": row.name,
                         "type": row.range_type, **asdict(row.durations)}
                    )  # fmt: skip
        return rows

    def range(self, name: str, kernel: str | None = None) -> Stats:
        """The distribution of every instance of range ``name`` (in ``kernel``, where given, by
        its symbol or a part of it), pooled over processes and launches: ``cap.range("mainloop").p50``.
        Raises :class:`~iket_cli.errors.UsageError` when no instance has that name."""
        import numpy as np

        from ..analysis.stats import stats
        from ..errors import UsageError
        from ..model import trace as trace_mod

        found = []
        for process in self.instrumented:
            trace = trace_mod.load(process.trace_json, kinds=("ranges",))
            wanted = [i for i, text in enumerate(trace.strings) if text == name]
            for launch in trace.launches:
                if wanted and (kernel is None or kernel in launch.kernel):
                    names = np.asarray(launch.ranges.name, dtype=np.int64)
                    keep = np.isin(names, wanted)
                    found.append(np.asarray(launch.ranges.end)[keep] - np.asarray(launch.ranges.start)[keep])
        result = stats(np.concatenate(found)) if found else None
        if result is None:
            raise UsageError(f"no range {name!r} in {self.output_dir}", hint="capture.ranges() lists them")
        return result
