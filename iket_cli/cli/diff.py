"""``iket diff``: what changed between two captures, and a gate for CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import CaptureError
from ..model.vocab import DIFF_FORMATS, DIFF_STATS
from . import options


@click.command("diff")
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option(
    "--stat",
    type=click.Choice(DIFF_STATS),
    default="median",
    show_default=True,
    help="Statistic compared per (kernel, range).",
)
@click.option(
    "--fail-over",
    metavar="THRESHOLD",
    help="Exit 1 when a range got slower by more than this: 5%, or 'mainloop=3%,*=10%' "
    "(a bare number is a fraction: 0.05 is 5%).",
)
@options.output_format(DIFF_FORMATS, "table")
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a side-by-side HTML report (offline, one file) here.",
)
def command(base: Path, new: Path, stat: str, fail_over: str | None, fmt: str, html_out: Path | None) -> int:
    """Compare BASE and NEW (capture directories, manifests or traces).

    A range counts as slower only when its statistic grew by more than the threshold, by
    more than the GPU timer's step and by more than its instances' spread explains (see
    docs/diff.md).
    """
    from ..analysis import diff, gate, judged
    from ..model.reading import open_capture
    from ..render import formats
    from ..render.text import shown

    if html_out is not None:
        from ..model import outputs
        from ..render import report

        outputs.check_file(html_out, [base, new], what="HTML report")
    opened = {"BASE": open_capture(base), "NEW": open_capture(new)}
    changes = diff.compare(opened["BASE"], opened["NEW"], stat=stat, fail_over=fail_over)
    formats.write("diff", diff.Compared(changes, stat), fmt, sys.stdout)
    for moved in diff.bound_moves(opened["BASE"], opened["NEW"]):  # information: stdout stays the table
        sys.stderr.write(f"iket: {moved}\n")
    if html_out is not None:
        from dataclasses import asdict

        from ..model import atomic

        page = report.build_diff(opened["BASE"], opened["NEW"], [asdict(c) for c in changes], stat)
        atomic.write(html_out, page)
        sys.stderr.write(f"iket: wrote {html_out}\n")
    windows = [(side.manifest or {}).get("window") or {} for side in opened.values()]
    if all(isinstance(w.get("pid"), int) for w in windows) and windows[0]["pid"] == windows[1]["pid"]:
        numbers = " and ".join(str(w.get("number")) for w in windows)
        sys.stderr.write(
            f"iket: note: BASE and NEW are windows {numbers} of one process ({windows[0]['pid']:#x})\n"
        )
    verdicts = {name: judged.judge(side) for name, side in opened.items()}
    for name, found in verdicts.items():
        where = shown(str(opened[name].location))
        if found.line:
            sys.stderr.write(f"iket: warning: {name} ({where}) {shown(found.line)}\n")
        elif found.note:
            sys.stderr.write(f"iket: note: {name} ({where}): {found.note}\n")
    failed = gate.verdict(changes, fail_over, unmatched_fails=fail_over is not None)
    incomplete = [name for name, found in verdicts.items() if found.state == judged.INCOMPLETE]
    if fail_over is not None and incomplete:  # said first: it may be why ranges went missing
        raise CaptureError(
            f"the gate cannot pass: {' and '.join(incomplete)} {'is' if len(incomplete) == 1 else 'are'} "
            "INCOMPLETE, their numbers miss what IKET lost",
            phase="diff",
            hint="capture again without the loss (iket lint names each loss and its fix)",
            details=[failed.message] if failed is not None else [],
        )
    if failed is not None:
        raise CaptureError(failed.message, phase="diff", hint=failed.hint)
    return 0
