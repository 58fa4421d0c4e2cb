"""The options several commands share where they behave identically: one declaration and
one help text each. (``profile --quiet`` keeps the workload's output and is its own option;
``postprocess --format`` picks artifacts and ``export --format`` files: theirs too.)"""

from __future__ import annotations

import math

import click


class Seconds(click.FloatRange):
    """A number of seconds above 0: ``nan`` and ``inf`` are not (a FloatRange lets ``nan`` by)."""

    name = "seconds"

    def __init__(self) -> None:
        super().__init__(min=0, min_open=True)

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return number


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
