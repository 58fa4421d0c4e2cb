"""``iket diff``: what changed between two captures, and a gate for CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import CaptureError
from ..model.vocab import DIFF_FORMATS, DIFF_STATS


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
    help="Exit 1 when a range got slower by more than this: 5%, or 'mainloop=3%,*=10%'.",
)
@click.option("--format", "fmt", type=click.Choice(DIFF_FORMATS), default="table", show_default=True)
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
    from ..analysis import diff
    from ..render import diff as diff_view

    if html_out is not None:
        from ..model import outputs
        from ..render import report

        outputs.check_file(html_out, [base, new], what="HTML report")
    changes = diff.compare(base, new, stat=stat, fail_over=fail_over)
    diff_view.render(changes, fmt, sys.stdout, stat)
    for moved in diff.bound_moves(base, new):  # information, on stderr: stdout stays the table
        sys.stderr.write(f"iket: {moved}\n")
    if html_out is not None:
        from dataclasses import asdict

        from ..model import atomic

        page = report.build_diff(base, new, [asdict(c) for c in changes], stat)
        atomic.write(html_out, page)
        sys.stderr.write(f"iket: wrote {html_out}\n")
    regressions = [c for c in changes if c.regression]
    if regressions:
        worst = regressions[0]
        raise CaptureError(
            f"{len(regressions)} range(s) got slower than --fail-over {fail_over} allows; worst: "
            f"{worst.name or worst.kernel} / {worst.range} {worst.ratio:.3f}x",
            phase="diff",
        )
    unsure = diff.undecided(changes)
    if unsure:
        first = unsure[0]
        raise CaptureError(
            f"not enough repeats to decide: {len(unsure)} range(s) over --fail-over {fail_over} "
            f"({first.name or first.kernel} / {first.range} {first.ratio:.3f}x) with "
            f"{first.repeats[0]} repeat(s) of BASE and {first.repeats[1]} of NEW",
            phase="diff",
            hint="capture both sides with iket profile --repeat 3 or more (the rank test needs 3 against 3)",
        )
    missing = diff.unmatched(changes) if fail_over else []
    if missing:
        raise CaptureError(
            f"{len(missing)} range(s) of BASE have no match in NEW, so --fail-over cannot judge "
            f"them: {', '.join(f'{c.name or c.kernel} / {c.range}' for c in missing[:3])}",
            phase="diff",
            hint="a renamed or removed range cannot be gated: keep its name, or make NEW the baseline",
        )
    return 0
