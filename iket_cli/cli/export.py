"""``iket export``: a capture's tables as Parquet or CSV files (docs/schema.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..model.vocab import EXPORT_FORMATS


@click.command("export")
@click.argument("capture", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the tables (created): one file per table.",
)
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="parquet", show_default=True)
def command(capture: Path, out_dir: Path, fmt: str) -> int:
    """Write CAPTURE's tables (processes, kernels, launches, warps, ranges, markers) to DIR.

    The tables and their units are in docs/schema.md; query them with any Parquet reader,
    or with iket sql CAPTURE "SELECT ..." without exporting. Needs pip install 'iket-cli[sql]'.
    """
    from ..pipeline.export import export

    for path in export(capture, out_dir, fmt):
        sys.stderr.write(f"iket: wrote {path}\n")
    return 0
