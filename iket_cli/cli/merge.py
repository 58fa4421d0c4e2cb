"""``iket merge``: one capture made of several."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import options


@click.command("merge")
@click.argument("out", type=click.Path(path_type=Path))
@click.argument("captures", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--copy", is_flag=True, help="Copy the artifacts (default: hard links where possible).")
@click.option("--clobber", is_flag=True, help="Replace a previous capture in OUT.")
@options.json_output
@click.option("--timeline", is_flag=True, help="Also OUT/timeline.pftrace: every process on one timeline.")
@click.option(
    "--offset",
    "offsets",
    multiple=True,
    metavar="CAPTURE=NS",
    help="Shift one capture's timestamps by NS nanoseconds on the timeline (repeatable).",
)
def command(
    out: Path,
    captures: tuple[Path, ...],
    copy: bool,
    clobber: bool,
    as_json: bool,
    timeline: bool,
    offsets: tuple[str, ...],
) -> int:
    """Merge CAPTURES into OUT; each keeps its artifacts in OUT/<its folder name>/."""
    from ..pipeline.merge import merge

    shifts = {}
    for item in offsets:
        name, sep, value = item.rpartition("=")
        if not sep or not value.lstrip("-").isdigit():
            raise click.BadParameter(f"{item!r} is not CAPTURE=NANOSECONDS", param_hint="--offset")
        shifts[name] = int(value)
    record = merge(
        out, list(captures), copy=copy, clobber=clobber, timeline=timeline or bool(shifts), offsets=shifts
    )
    if as_json:
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
    else:
        sys.stderr.write(
            f"iket: merged {len(record['processes'])} process(es) from {len(captures)} captures into {out}\n"
        )
    return 0
