"""``iket postprocess``: decode a capture kept with ``--keep``, on any machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import CaptureError


@click.command("postprocess", short_help="Decode a capture kept with --keep (no GPU needed).")
@click.argument("capture_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["perfetto", "json", "html", "all"]),
    default="all",
    show_default=True,
    help="Artifacts to write per process.",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: CPUs, memory).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest on stdout.")
def command(capture_dir: Path, fmt: str, jobs: int | None, quiet: bool, as_json: bool) -> int:
    """Decode every kept raw capture in CAPTURE_DIR and write or update its manifest.

    CAPTURE_DIR is a capture made by ``iket profile --keep`` or by ``run-iket --keep``.
    Running it again gives the same artifacts. A missing or corrupt raw file is reported
    by name, the other processes are still decoded, and the exit status is 1.
    """
    from ..console import DecodeProgress
    from ..postprocess import FORMATS, postprocess_capture

    formats = list(FORMATS) if fmt == "all" else [fmt]
    with DecodeProgress(quiet=quiet) as progress:
        record, outcomes = postprocess_capture(capture_dir, formats, jobs=jobs, progress=progress)
    if as_json:
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
    failures = [o for o in outcomes if o.error]
    if failures:
        reasons = list(dict.fromkeys(o.error for o in failures))  # one line per broken file
        raise CaptureError(
            f"{len(failures)} of {len(outcomes)} decodes failed: {reasons[0]}",
            phase="postprocess",
            details=reasons[1:],
        )
    return 0
