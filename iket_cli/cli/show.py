"""``iket show``: what a capture says, in the terminal (or as JSON, CSV, markdown)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..model.vocab import GROUPINGS, SHOW_FORMATS, SHOW_STATUSES, WAIT_PATTERN
from . import options

if TYPE_CHECKING:
    from ..model.reading import Opened


def _cta(_ctx: click.Context, _param: click.Parameter, text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise click.BadParameter(f"{text!r} is not X,Y,Z")
    x, y, z = (int(p) for p in parts)
    return (x, y, z)


@click.command("show")
@click.argument("capture", type=click.Path(path_type=Path))
@options.output_format(SHOW_FORMATS, "table")
@click.option("--kernel", metavar="PATTERN", help="Kernels whose name contains or glob-matches PATTERN.")
@click.option("--range", "range_name", metavar="NAME", help="Only ranges of this name.")
@click.option(
    "--launch", type=click.IntRange(min=0), metavar="N", help="Only launch N (0-based, file order)."
)
@click.option("--cta", callback=_cta, metavar="X,Y,Z", help="Only records of this CTA.")
@click.option("--warp", type=click.IntRange(min=0), metavar="N", help="Only records of warp N (in its CTA).")
@click.option(
    "--by",
    type=click.Choice(GROUPINGS),
    default="kernel",
    show_default=True,
    help="Group the statistics.",
)
@click.option(
    "--top", type=click.IntRange(min=1), metavar="N", help="Only the N ranges with most total time."
)
@click.option(
    "--roles",
    "roles_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Warp roles for --by role (CuTe DSL's kernel_symbols.json; default: the capture's own).",
)
@click.option(
    "--payload",
    is_flag=True,
    help="Per range and mark name: the payload type and the distinct values (or min .. max).",
)
@click.option(
    "--timeline",
    is_flag=True,
    help="Draw one launch (--launch, default 0; --cta for one CTA): a row per warp.",
)
@click.option(
    "--pipeline",
    is_flag=True,
    help="Per kernel with a DAG or warp roles: each stage's busy/waiting/idle share, period, work, "
    "starved and slack times, fill and drain, and the stage that bounds it.",
)
@click.option(
    "--wait-pattern",
    default=None,
    metavar="GLOB",
    help=f"--pipeline: ranges whose name matches are waiting, not work  [default: {WAIT_PATTERN}]",
)
@click.option(
    "--width",
    type=click.IntRange(min=20),
    default=100,
    show_default=True,
    help="Timeline width in characters.",
)
def command(
    capture: Path,
    fmt: str,
    by: str,
    top: int | None,
    roles_file: Path | None,
    payload: bool,
    timeline: bool,
    pipeline: bool,
    wait_pattern: str | None,
    width: int,
    **filters: object,
) -> int:
    """Summarise CAPTURE (a capture directory, its manifest.json or a *.trace.json).

    Per process and kernel: launches, grid and block; per range name: count, total, mean,
    min, p50, p90, p99, max and share of the warps' lifetime; per mark: count and offset
    from the start of the enclosing range.
    """
    from ..errors import UsageError
    from ..model.reading import open_capture
    from ..render import formats

    if wait_pattern is not None and not pipeline:
        raise UsageError(
            "--wait-pattern needs --pipeline", hint="iket show CAPTURE --pipeline --wait-pattern GLOB"
        )
    opened = open_capture(capture, **filters)
    if pipeline:
        from ..analysis.stages_capture import pipelines_capture

        found = pipelines_capture(opened, roles_file, wait_pattern or WAIT_PATTERN)
        formats.write("pipeline", found, fmt, _out(fmt))
        return 0
    if timeline:
        from ..render import timeline as timeline_mod

        for seen, chosen in opened.traces():
            sys.stdout.write(f"pid {seen.label}\n")
            timeline_mod.render(chosen, sys.stdout, launch=0, width=width)  # the first that matches
        return 0
    if payload:
        from ..analysis.payloads import payloads_capture

        found = payloads_capture(opened)
        if not any(p["payloads"] for p in found):
            sys.stderr.write(f"iket: no event in {capture} carries a payload\n")
            return 0
        formats.write("payloads", found, fmt, _out(fmt))
        return 0
    from ..analysis.summary import summarize_capture

    processes = summarize_capture(opened, by=by, top=top, roles_file=roles_file)
    formats.write("summary", processes, fmt, _out(fmt))
    _said_beside(opened, processes)
    return 0


def _said_beside(opened: Opened, processes: list[dict]) -> None:
    """On stderr (stdout stays the report): each process's lint findings, a replay's line,
    and a capture whose status says its tables show only part of it (an error)."""
    from ..errors import CaptureError
    from ..model.manifest import replay_line
    from ..render.tables import lint_lines
    from ..render.text import shown

    for process in processes:
        for line in lint_lines(process["findings"]):
            sys.stderr.write(f"{process['process']}: {line}\n")
    record = opened.manifest
    if record is not None and replay_line(record):
        sys.stderr.write(f"iket: this capture is {shown(replay_line(record))}\n")
    if record is not None and record["status"] not in SHOW_STATUSES:
        said = (record.get("error") or {}).get("message", "")
        raise CaptureError(
            f"this capture's status is {record['status']}{f' ({said})' if said else ''}: the tables "
            "show only what was decoded",
            hint="decode it again (iket postprocess DIR) or capture again",
        )


def _out(fmt: str):
    """Standard output for ``fmt``: CSV and markdown spell control characters out on a terminal
    (rich's table does so itself; JSON escapes them)."""
    from ..render.text import for_terminal

    return for_terminal(sys.stdout) if fmt in ("csv", "markdown") else sys.stdout
