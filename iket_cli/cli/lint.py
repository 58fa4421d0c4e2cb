"""``iket lint``: instrumentation problems found in a capture's traces."""

from __future__ import annotations

import json
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
    from ..analysis import lint
    from ..model import trace as trace_mod
    from ..model.folder import find_traces
    from ..render.tables import lint_lines

    report = []
    for label, path in find_traces(capture):
        findings = lint.lint_file(path, trace_mod.load(path))
        report.append({"process": label, "trace": str(path), "findings": [f.to_dict() for f in findings]})
        if fmt == "text":
            for line in lint_lines(findings):
                sys.stdout.write(f"{label}: {line}\n")
    if fmt == "json":
        sys.stdout.write(json.dumps({"processes": report}, indent=2) + "\n")
    total = sum(len(p["findings"]) for p in report)
    if fmt == "text" and not total:
        sys.stdout.write("iket: no instrumentation problem found\n")
    if strict and total:
        raise CaptureError(f"{total} instrumentation finding(s)", phase="lint")
    return 0
