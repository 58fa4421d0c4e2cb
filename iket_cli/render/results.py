"""``iket sql``'s result (an Arrow table) as a terminal table, CSV, JSON or markdown."""

from __future__ import annotations

import json
from typing import IO, Any

from ..model.units import duration
from .tables import markdown_text

#: Rows a terminal table shows before it says how many it left out (CSV and JSON: all).
TABLE_ROWS = 200


def _json(result, out: IO[str]) -> None:
    out.write(json.dumps({"columns": result.column_names, "rows": result.to_pylist()}, default=str) + "\n")


def _csv(result, out: IO[str]) -> None:
    import csv

    columns = result.column_names
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[_plain(row[c]) for c in columns] for row in result.to_pylist()])


def _markdown(result, out: IO[str]) -> None:
    columns = result.column_names
    out.write("| " + " | ".join(columns) + " |\n|" + " --- |" * len(columns) + "\n")
    for row in result.to_pylist():
        out.write("| " + " | ".join(markdown_text(_plain(row[c])) for c in columns) + " |\n")


def _terminal(result, out: IO[str]) -> None:
    _table(result.to_pylist(), result.column_names, out)


def _plain(value: Any) -> str:
    return "" if value is None else str(value)


def _table(rows: list[dict], columns: list[str], out: IO[str]) -> None:
    from rich.table import Table

    from .text import markup, rich_console

    table = Table()  # the count on a line of its own: a narrow table would wrap it
    for column in columns:
        table.add_column(markup(column), justify="right" if _numeric(rows, column) else "left")
    for row in rows[:TABLE_ROWS]:
        table.add_row(*(markup(_cell(column, row[column])) for column in columns))
    console = rich_console(file=out, width=max(120, 14 * len(columns)))
    console.print(f"{len(rows):,} row(s)", style="italic", highlight=False)
    console.print(table)
    if len(rows) > TABLE_ROWS:
        console.print(f"(first {TABLE_ROWS} rows shown: --format csv or json gives all {len(rows):,})")


def _numeric(rows: list[dict], column: str) -> bool:
    return any(
        isinstance(row[column], (int, float)) and not isinstance(row[column], bool) for row in rows[:50]
    )


def _cell(column: str, value: Any) -> str:
    """A value as text; nanosecond columns (``*_ns``) also in readable units."""
    if value is None:
        return "-"
    if column.endswith("_ns") and isinstance(value, (int, float)):
        return f"{value:,.0f} ({duration(value)})"
    if isinstance(value, float):
        return f"{value:,.3f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


#: ``--format`` -> writer of ``iket sql``'s result, an Arrow table (render/formats.py).
WRITERS = {"json": _json, "csv": _csv, "markdown": _markdown, "table": _terminal}
