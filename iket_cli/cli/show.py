"""``iket show``: what a capture says, in the terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("show", short_help="Summarise a capture: per kernel, range and mark.")
@click.argument("capture", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output on stdout.",
)
def command(capture: Path, fmt: str) -> int:
    """Summarise CAPTURE (a capture directory, its manifest.json or a *.trace.json).

    Per process and kernel: launches, grid and block; per range name: count, total, mean,
    min, p50, p90, p99, max and share of the warps' lifetime; per mark: count and offset
    from the start of the enclosing range.
    """
    from .. import show

    processes = show.summarize(capture)
    (show.render_json if fmt == "json" else show.render_table)(processes, sys.stdout)
    return 0
