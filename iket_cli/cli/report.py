"""``iket report``: one self-contained HTML file of a capture, for a browser with no network."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("report")
@click.argument("capture", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file to write. Default: report.html in the capture directory.",
)
@click.option("--title", help="The page title. Default: from the capture's target.")
@click.option(
    "--roles",
    "roles_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Warp roles to label rows with (CuTe DSL's kernel_symbols.json; default: the capture's own).",
)
def command(capture: Path, output: Path | None, title: str | None, roles_file: Path | None) -> int:
    """Write one HTML file for CAPTURE (a capture directory, its manifest.json or a *.trace.json).

    It opens from file:// with no network and no server: the capture's metadata, the
    statistics of iket show as sortable tables, and a zoomable timeline of each launch.
    """
    from ..render import report

    if output is None:
        folder = capture if capture.is_dir() else capture.parent
        output = folder / "report.html"
    from ..model.units import human_bytes

    written = report.write(capture, output, title=title, roles_file=roles_file)
    size = human_bytes(written.stat().st_size)
    sys.stderr.write(f"iket: wrote {written} ({size}); open it in a browser\n")
    return 0
