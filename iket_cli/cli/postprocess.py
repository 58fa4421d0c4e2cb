"""``iket postprocess``: decode a capture kept with ``--keep``, on any machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..model.vocab import DECODE_CHOICES, FORMATS
from . import options


@click.command("postprocess")
@click.argument("capture_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(DECODE_CHOICES),
    default="all",
    show_default=True,
    help="Artifacts to write per process.",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: CPUs, memory).")
@options.quiet
@options.json_output
def command(capture_dir: Path, fmt: str, jobs: int | None, quiet: bool, as_json: bool) -> int:
    """Decode every kept raw capture in CAPTURE_DIR and write or update its manifest.

    CAPTURE_DIR is a capture made by ``iket profile --keep`` or by ``run-iket --keep``.
    Running it again gives the same artifacts. A missing or corrupt raw file is reported
    by name, the other processes are still decoded, and the exit status is 1.
    """
    from ..pipeline.decoding import decode_error
    from ..pipeline.postprocess import postprocess_capture
    from ..render.decode_progress import DecodeProgress

    formats = list(FORMATS) if fmt == "all" else [fmt]
    with DecodeProgress(quiet=quiet) as progress:
        record, outcomes, warnings = postprocess_capture(capture_dir, formats, jobs=jobs, progress=progress)
    for message, hint in warnings:
        sys.stderr.write(f"iket: warning: {message}\niket: hint: {hint}\n")
    if as_json:
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
    failed = [o for o in outcomes if o.error]
    if failed:
        raise decode_error(failed, len(outcomes))
    return 0
