"""``iket sql``: SQL (DuckDB) over one or more captures' tables, no files needed."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import UsageError
from ..model.vocab import SQL_FORMATS, TABLE_NAMES
from . import options


@click.command("sql")
@click.argument("words", nargs=-1, required=True, metavar="[NAME=]CAPTURE... QUERY")
@options.output_format(SQL_FORMATS, "table")
@click.option("--schema", is_flag=True, help="List the tables and their columns instead of running a query.")
@click.option(
    "--allow-files",
    is_flag=True,
    help="Let the query read and write files and load extensions (default: the tables only).",
)
def command(words: tuple[str, ...], fmt: str, schema: bool, allow_files: bool) -> int:
    """Run QUERY over CAPTURE's tables: iket sql CAPTURE... "SELECT ...".

    \b
    iket sql cap "SELECT name, avg(duration_ns) FROM ranges GROUP BY name"
    iket sql base=cap1 new=cap2 "SELECT capture, name, median(duration_ns) FROM ranges GROUP BY ALL"
    iket sql cap --schema

    The tables (processes, kernels, launches, warps, ranges, markers) and their units are in
    docs/schema.md; with NAME=CAPTURE each row's capture column says NAME. Needs
    pip install 'iket-cli[sql]'.
    """
    from ..analysis import sql
    from ..render import formats

    captures, query = _split(list(words), schema)
    loading = sql.preload()
    try:
        tables = sql.gather(captures, sql.needed(query) if not schema else TABLE_NAMES)
    finally:
        loading.join()
    if schema:
        sys.stdout.write(sql.schema(tables) + "\n")
        return 0
    formats.write("results", sql.run(sql.connect(tables, allow_files=allow_files), query), fmt, sys.stdout)
    return 0


def _split(words: list[str], schema: bool) -> tuple[list[tuple[str, Path]], str]:
    """``[NAME=]CAPTURE ...`` and the query (the last word, unless --schema)."""
    query = "" if schema else words.pop() if len(words) > 1 else ""
    if not schema and not query:
        raise UsageError("give a capture and a query", hint='iket sql CAPTURE "SELECT * FROM launches"')
    captures = []
    for word in words:
        name, sep, where = word.partition("=")
        if not sep or Path(word).exists():  # a path that holds "=" is a path
            name, where = "", word
        if not Path(where).exists():
            raise UsageError(f"{where} does not exist", hint="give capture directories, then the query last")
        captures.append((name, Path(where)))
    return captures, query
