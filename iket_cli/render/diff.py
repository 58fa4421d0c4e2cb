"""``iket diff``'s output: the (kernel, range) changes as a terminal table, JSON or markdown."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import IO

from ..analysis.diff import Change
from ..model.units import duration
from .tables import markdown_text


def render(changes: list[Change], fmt: str, out: IO[str], stat: str) -> None:
    if fmt == "json":
        out.write(json.dumps({"stat": stat, "changes": [asdict(c) for c in changes]}, indent=2) + "\n")
        return
    rows = [_row(c) for c in changes]
    header = ["kernel", "range", f"base {stat}", f"new {stat}", "ratio", "change", "status"]
    if fmt == "markdown":
        out.write("| " + " | ".join(header) + " |\n|" + " --- |" * len(header) + "\n")
        for row in rows:
            out.write("| " + " | ".join([markdown_text(row[0]), *row[1:]]) + " |\n")
        return
    from rich.table import Table

    from .text import markup, rich_console

    table = Table(title=f"iket diff · {stat} per range, by impact", title_justify="left")
    for column in header:
        left = column in ("kernel", "range", "status")
        table.add_column(column, justify="left" if left else "right", no_wrap=column == "kernel")
    for change, row in zip(changes, rows, strict=True):
        table.add_row(*(markup(cell) for cell in row), style="red" if change.regression else None)
    longest = max((len(row[0]) for row in rows), default=0)
    rich_console(file=out, width=max(160, longest + 90)).print(table)


def _row(c: Change) -> list[str]:
    ratio = "-" if c.ratio is None else f"{c.ratio:.3f}x"
    delta = "-" if c.delta is None else ("+" if c.delta >= 0 else "-") + duration(abs(c.delta))
    status = "REGRESSION" if c.regression else "UNDECIDED: too few repeats" if c.undecided else c.status
    if c.repeats is not None:  # judged by the repeats (analysis.gate)
        tested = "" if c.p_value is None else f", p {c.p_value:.3f}"
        status += f" ({c.repeats[0]} vs {c.repeats[1]} repeats{tested})"
    return [c.name or c.kernel, c.range, duration(c.base), duration(c.new), ratio, delta, status]
