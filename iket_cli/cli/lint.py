"""``iket lint``: instrumentation problems found in a capture's traces."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import CaptureError
from ..model.vocab import LINT_FORMATS
from . import options


@click.command("lint")
@click.argument("capture", type=click.Path(path_type=Path))
@options.output_format(LINT_FORMATS, "text")
@click.option("--strict", is_flag=True, help="Exit 1 when there is any finding.")
def command(capture: Path, fmt: str, strict: bool) -> int:
    """Check CAPTURE (a capture directory, its manifest.json or a *.trace.json) for launches
    without events, too many or too long event names, ranges at the timer's resolution,
    ranges never closed (which the decoder drops) and event names with two payload types."""
    from ..analysis.lint import lint_capture
    from ..model.reading import open_capture
    from ..render import formats

    report = lint_capture(open_capture(capture))
    formats.write("lint", report, fmt, sys.stdout)
    total = sum(len(p.findings) for p in report)
    if strict and total:
        raise CaptureError(f"{total} instrumentation finding(s)", phase="lint")
    return 0
