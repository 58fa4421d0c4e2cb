"""``iket show --pipeline``: per kernel its stages and the sentence that names the bound.

The figures come from :mod:`iket_cli.analysis.stages`; here they become a table (rich), JSON,
CSV (one row per stage) or markdown.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import IO, Any

from ..analysis.stages import STAGE_COLUMNS
from ..model.names import short as short_name
from ..model.units import duration

#: The CSV's columns: where, then the stage's figures (analysis/stages.STAGE_COLUMNS).
COLUMNS = ("process", "kernel", *STAGE_COLUMNS)


def to_json(found: list[tuple[str, list]]) -> dict[str, Any]:
    """``{"processes": [{"process", "kernels": [pipeline...]}]}``."""
    return {
        "processes": [{"process": label, "kernels": [asdict(p) for p in pipes]} for label, pipes in found]
    }


def _json(found, out: IO[str]) -> None:
    out.write(json.dumps(to_json(found), indent=2) + "\n")


def _rows(found):
    for label, pipes in found:
        for pipe in pipes:
            for stage in pipe.stages:
                yield label, pipe, stage


def _csv(found, out: IO[str]) -> None:
    import csv

    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for label, pipe, stage in _rows(found):
        data = asdict(stage)
        writer.writerow({"process": label, "kernel": pipe.kernel, "stage": data.pop("name"), **data})


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _cells(stage) -> list[str]:
    return [
        stage.name,
        stage.role or "",
        f"{stage.instances:,}",
        f"{stage.warps:,}",
        _share(stage.busy),
        _share(stage.waiting),
        _share(stage.idle),
        duration(stage.period_ns),
        duration(stage.work_ns),
        duration(stage.starved_ns),
        duration(stage.slack_ns),
    ]


#: The table's and markdown's header: the same figures, shown with their units.
HEADER = tuple(column.removesuffix("_ns") for column in STAGE_COLUMNS)


def _markdown(found, out: IO[str]) -> None:
    for label, pipes in found:
        for pipe in pipes:
            out.write(f"**pid {label} · {short_name(pipe.kernel)}**: {pipe.sentence}\n\n")
            out.write("| " + " | ".join(HEADER) + " |\n|" + " --- |" * len(HEADER) + "\n")
            for stage in pipe.stages:
                out.write("| " + " | ".join(_cells(stage)) + " |\n")
            out.write(f"\nfill {duration(pipe.fill_ns)} · drain {duration(pipe.drain_ns)}\n\n")


def _table(found, out: IO[str]) -> None:
    from rich.table import Table

    from .text import markup, rich_console

    console = rich_console(file=out, width=160)
    for label, pipes in found:
        for pipe in pipes:
            title = (
                f"pid {markup(label)} · {markup(short_name(pipe.kernel))} · {pipe.launches} launch(es) · "
                f"fill {duration(pipe.fill_ns)} · drain {duration(pipe.drain_ns)}"
            )
            table = Table(title=title, title_justify="left")
            for column in HEADER:
                table.add_column(column, justify="left" if column in ("stage", "role") else "right")
            for stage in pipe.stages:
                table.add_row(*(markup(cell) for cell in _cells(stage)))
            console.print(table)
            console.print(markup(pipe.sentence), highlight=False)


#: ``--format`` -> writer of ``[(process label, [pipeline, ...]), ...]`` (render/formats.py).
WRITERS = {"table": _table, "json": _json, "csv": _csv, "markdown": _markdown}
