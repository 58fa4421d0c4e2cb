"""``iket sql``: DuckDB over a capture's tables (:mod:`.tables`), registered from Arrow.

No file is written: each table of each capture is built in memory and registered as a
view of one DuckDB connection, under the names of ``docs/schema.md``. Several captures
(``base=A new=B``) share each table, told apart by its ``capture`` column. DuckDB and
pyarrow are the optional ``sql`` extra.

A query is confined to those tables: DuckDB could otherwise read any file the user may read
(``read_blob('/etc/shadow')``), write files (``COPY ... TO``), attach databases and install
extensions from the network, and a query can come from someone else (a CI configuration,
a snippet pasted from a page). The connection is made without external access, extensions
neither installed nor loaded, and its configuration locked; ``allow_files`` opts out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ToolchainError, UsageError
from ..model.reading import open_capture
from ..model.vocab import LATER_TABLES, TABLE_NAMES
from . import tables as tables_mod


def require():
    """duckdb, or a one-line error naming the extra that brings it (exit 2)."""
    tables_mod.require("iket sql")
    try:
        import duckdb
    except ImportError:
        raise ToolchainError(
            "iket sql needs duckdb, which is not installed",
            hint="pip install 'iket-cli[sql]' (pyarrow and duckdb)",
        ) from None
    return duckdb


def preload():
    """Import DuckDB in a thread while the traces load (not after them); a missing one is
    reported by :func:`require` later, in one line. The caller joins the thread before it
    exits, whatever happened: an interpreter that ends while DuckDB's native code is being
    loaded aborts (SIGABRT, seen when the traces' reading failed first)."""
    import contextlib
    import threading

    def load() -> None:
        with contextlib.suppress(ImportError):
            import duckdb  # noqa: F401

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    return thread


def needed(query: str) -> tuple[str, ...]:
    """The tables a query names (as whole words): only those are built from the traces."""
    import re

    words = set(re.findall(r"[A-Za-z_]+", query.lower()))
    return tuple(name for name in TABLE_NAMES if name in words) or TABLE_NAMES


def gather(captures: list[tuple[str, Path]], only: tuple[str, ...] = TABLE_NAMES) -> dict[str, Any]:
    """The tables in ``only`` of every ``(name, location)``, the captures' rows one after another."""
    pa = tables_mod.require()
    built = [
        _exported(where, name, only) or tables_mod.build(open_capture(where), name, only)
        for name, where in captures
    ]
    joined = {}
    for table in only:
        parts = [b[table] for b in built if b[table].num_rows or len(built) == 1]
        joined[table] = pa.concat_tables(parts, promote_options="permissive") if parts else built[0][table]
    return joined


def _exported(location: Path, name: str, only: tuple[str, ...]) -> dict[str, Any] | None:
    """The tables ``iket export`` wrote into ``location`` (Parquet), None if it holds none:
    read as they are, far faster than building them again from a trace."""
    paths = {table: Path(location) / f"{table}.parquet" for table in TABLE_NAMES}
    if not all(path.is_file() for table, path in paths.items() if table not in LATER_TABLES):
        return None
    import pyarrow.parquet as pq

    tables = {  # a folder exported before the later tables: those are empty
        table: pq.read_table(path) if path.is_file() else tables_mod.empty()
        for table, path in paths.items()
        if table in only
    }
    if name:  # the capture's name in this query, as for a capture read from its traces
        for table, data in tables.items():
            if "capture" in data.column_names:
                where = data.column_names.index("capture")
                column = tables_mod.named(name, data.num_rows).cast(data.schema.field(where).type)
                tables[table] = data.set_column(where, "capture", column)
    return tables


#: What confines a connection to the registered tables (the last one locks the others in).
CONFINED = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET lock_configuration = true",
)
#: How DuckDB words a refusal of the confinement.
_REFUSED = ("disabled by configuration", "disabled through configuration", "Cannot change configuration")


def connect(tables: dict[str, Any], *, allow_files: bool = False):
    """An in-memory DuckDB connection with each table registered under its name, confined to
    them unless ``allow_files``."""
    duckdb = require()
    connection = duckdb.connect()
    for name, table in tables.items():
        connection.register(name, table)
    if not allow_files:
        for setting in CONFINED:
            connection.execute(setting)
    return connection


def run(connection, query: str):
    """The query's result as an Arrow table; a DuckDB error as a one-line usage error."""
    import duckdb

    try:
        relation = connection.sql(query)
        if relation is None:  # a statement that returns nothing (SET, CREATE, ...)
            return tables_mod.require().table({})
        fetch = getattr(relation, "to_arrow_table", None) or relation.arrow  # DuckDB 2 | 1
        return fetch()
    except duckdb.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        hint = "iket sql CAPTURE --schema lists the tables and columns"
        if any(text in first for text in _REFUSED):
            hint = "a query reads only the captures' tables; --allow-files lets it read and write files"
        raise UsageError(f"the query failed: {first}", hint=hint) from None


def schema(tables: dict[str, Any]) -> str:
    """Each table's columns and types, and its row count."""
    lines = []
    for name, table in tables.items():
        lines.append(f"{name} ({table.num_rows:,} rows)")
        for field in table.schema:
            kind = field.type.value_type if hasattr(field.type, "value_type") else field.type
            lines.append(f"  {field.name:<18} {kind}")
    return "\n".join(lines)
