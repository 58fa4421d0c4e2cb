"""The options several commands share where they behave identically: one declaration and
one help text each. (``profile --quiet`` keeps the workload's output and is its own option;
``postprocess --format`` picks artifacts and ``export --format`` files: theirs too.)"""

from __future__ import annotations

import click


def output_format(choices: tuple[str, ...], default: str):
    """``--format``: how the command writes its result on stdout."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="How to write the result on stdout.",
    )


#: ``--json``: the command's record (a manifest, the checks) as JSON on stdout.
json_output = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as JSON on stdout (messages stay on stderr)."
)
#: ``-q``: only errors on stderr.
quiet = click.option("-q", "--quiet", is_flag=True, help="Only errors.")
