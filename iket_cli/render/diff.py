"""``iket diff``'s output: the (kernel, range) changes as a terminal table, JSON or markdown."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import IO

from ..analysis.diff import Change, Compared
from ..model.units import duration
from .tables import markdown_text


def _json(compared: Compared, out: IO[str]) -> None:
    changes = [asdict(c) for c in compared.changes]
    out.write(json.dumps({"stat": compared.stat, "changes": changes}, indent=2) + "\n")


def _header(stat: str) -> list[str]:
    return ["kernel", "range", f"base {stat}", f"new {stat}", "ratio", "change", "status"]


def _markdown(compared: Compared, out: IO[str]) -> None:
    header = _header(compared.stat)
    out.write("| " + " | ".join(header) + " |\n|" + " --- |" * len(header) + "\n")
    for row in map(_row, compared.changes):
        out.write("| " + " | ".join([markdown_text(row[0]), *row[1:]]) + " |\n")


def _table(compared: Compared, out: IO[str]) -> None:
    from rich.table import Table

    from .text import markup, rich_console

    changes, stat = compared.changes, compared.stat
    rows = [_row(c) for c in changes]
    table = Table(title=f"iket diff · {stat} per range, by impact", title_justify="left")
    for column in _header(stat):
        left = column in ("kernel", "range", "status")
        table.add_column(column, justify="left" if left else "right", no_wrap=column == "kernel")
    for change, row in zip(changes, rows, strict=True):
        table.add_row(*(markup(cell) for cell in row), style="red" if change.regression else None)
    longest = max((len(row[0]) for row in rows), default=0)
    rich_console(file=out, width=max(160, longest + 90)).print(table)


def _row(c: Change) -> list[str]:
    ratio = "-" if c.ratio is None else f"{c.ratio:.3f}x"
    delta = "-" if c.delta is None else ("+" if c.delta >= 0 else "-") + duration(abs(c.delta))
    status = "REGRESSION" if c.regression else "UNDECIDED: too few repeats" if c.undecided else _moved(c)
    if c.repeats is not None:  # judged by the repeats (analysis.gate)
        tested = "" if c.p_value is None else f", p {c.p_value:.3f}"
        status += f" ({c.repeats[0]} vs {c.repeats[1]} repeats{tested})"
    return [c.name or c.kernel, c.range, duration(c.base), duration(c.new), ratio, delta, status]


def _moved(c: Change) -> str:
    """A matched range's status says which way it moved (no gate judged it)."""
    if c.status != "matched" or c.ratio is None or c.ratio == 1:
        return c.status if c.ratio != 1 else "same"
    return "slower" if c.ratio > 1 else "faster"


#: ``--format`` -> writer (the choices are ``vocab.DIFF_FORMATS``; render/formats.py).
WRITERS = {"json": _json, "markdown": _markdown, "table": _table}
