"""``iket run``: every capture of the project's configuration, as one CI job step."""

from __future__ import annotations

from pathlib import Path

import click

from ..model.vocab import EXECUTORS, POSTPROCESS_CHOICES
from . import options


def _workers(_ctx, _param, value: str | None) -> int | str | None:
    if value is None or value == "auto":
        return value
    if not value.isdigit() or int(value) < 1:
        raise click.BadParameter(f"{value!r} is not a positive number or auto")
    return int(value)


@click.command("run")
@click.argument("names", nargs=-1)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Config file (default: iket.toml, else [tool.iket] in pyproject.toml).",
)
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), help="Output root.")
@click.option(
    "--postprocess",
    type=click.Choice(POSTPROCESS_CHOICES),
    help="Artifacts to write per process, for every job (default: the configuration's, else all).",
)
@click.option(
    "--timeout",
    type=options.Seconds(),
    metavar="SECONDS",
    help="Kill a job's whole process tree after this many seconds (default: the configuration's).",
)
@click.option("--keep", is_flag=True, default=None, help="Keep run-iket's intermediates.")
@click.option("--fail-fast", is_flag=True, help="Start no new job after one failed (slurm: cancel the rest).")
@click.option(
    "-j",
    "--jobs",
    "workers",
    callback=_workers,
    metavar="N|auto",
    help="Jobs at a time, each on a GPU of its own (auto: one per visible GPU; default 1). "
    "With --executor slurm: jobs in the queue at once (default: all).",
)
@click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    help="Where jobs run: this host, or one Slurm job each (default: the configuration's, else local).",
)
@click.option(
    "--rerun-failed",
    is_flag=True,
    help="Run again only the jobs the last run over the output root failed; keep the others' records.",
)
@click.option("--job-result", type=click.Path(dir_okay=False, path_type=Path), hidden=True)
@click.option(
    "--baseline",
    type=click.Path(exists=True, path_type=Path),
    help="A previous run's output root (or its run-manifest.json) to gate against.",
)
@click.option(
    "--fail-over",
    metavar="THRESHOLD",
    default="5%",
    show_default=True,
    help="With --baseline: the slowdown that fails a job (5%, or 'mainloop=3%,*=10%'; a bare number "
    "is a fraction: 0.05 is 5%).",
)
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Write JUnit XML here.")
@click.option(
    "--summary",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set).",
)
@options.quiet
def command(**kw: object) -> int:
    """Run all configured jobs (or NAMES), each into <output root>/<name>/.

    Exit 0 when every job succeeded, 1 when any failed, was cancelled or regressed, 2 on a
    config error.
    """
    from ..pipeline import ci_run

    return ci_run.run(**kw)
