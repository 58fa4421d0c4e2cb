"""The ``iket`` command: a thin click group, one module per subcommand.

:func:`main` is the one place where an :class:`~iket_cli.errors.IketError` becomes a
message on stderr and an exit code (see :class:`~iket_cli.errors.ExitCode`).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from .._version import __version__
from ..errors import ExitCode, IketError, Terminated


def _version_text() -> str:
    from ..system import toolchain

    try:
        tool = toolchain.find()
        run_iket = f"run-iket {tool.version or 'unknown version'} ({tool.path})"
    except IketError:
        run_iket = "run-iket not found"
    return f"iket-cli {__version__}\n{run_iket}"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_version_text())
        ctx.exit(0)


#: Each subcommand: its module under ``iket_cli.cli`` and its line in ``iket --help``.
COMMANDS = {
    "profile": ("profile", "Capture an IKET timeline of a script, function, module or command."),
    "run": ("run", "Run the configured captures (a CI job step)."),
    "postprocess": ("postprocess", "Decode a capture kept with --keep (no GPU needed)."),
    "show": ("show", "Summarise a capture: per kernel, range and mark."),
    "diff": ("diff", "Compare two captures per kernel and range; gate on slowdowns."),
    "report": ("report", "Write an offline HTML report: metadata, tables, a timeline."),
    "merge": ("merge", "Build one capture from several (one per node or job)."),
    "lint": ("lint", "Find instrumentation problems in a capture."),
    "export": ("export", "Write a capture's tables as Parquet or CSV (docs/schema.md)."),
    "sql": ("sql", "Query captures' tables with SQL (DuckDB)."),
    "doctor": ("doctor", "Check this machine for IKET captures."),
}


class _LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs: ``iket --help`` lists
    them from :data:`COMMANDS` without importing any, which keeps start-up at click's cost."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, short_help = COMMANDS[cmd_name]
        command = importlib.import_module(f"{__name__}.{module}").command
        command.short_help = short_help
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show iket's version and run-iket's, then exit.",
)
def cli() -> None:
    """Capture and read NVIDIA IKET in-kernel timelines.

    \b
    iket profile script.py -o DIR     capture a script (or script.py:func, -m mod, -- CMD)
    iket run [NAME]...                the captures of iket.toml / [tool.iket] (a CI job step)
    iket postprocess DIR              decode a capture kept with --keep, on any machine
    iket show DIR                     summarise a capture per kernel, range and mark
    iket diff BASE NEW --fail-over 5%  compare two captures; exit 1 on a slowdown
    iket merge OUT CAPTURE...         one capture from several (one per node)
    iket report DIR                   one offline HTML file: metadata, tables, timeline
    iket lint DIR                     instrumentation problems (cached kernels, names, resolution)
    iket export DIR -o TABLES         the capture's tables as Parquet (or --format csv) files
    iket sql DIR "SELECT ..."         query the capture's tables with SQL (DuckDB)
    iket doctor                       can this machine capture? what is missing?

    Exit codes: 0 ok, 1 the workload or capture failed, 2 usage or refused output
    directory, 124 timeout, 129 hung up (SIGHUP), 130 interrupted (Ctrl-C), 131 SIGQUIT,
    143 terminated (SIGTERM).
    """


def report_error(error: IketError) -> None:
    """Write an error as one line, then its hint and details, on stderr. (Not ``report``: a
    subcommand module imported later, ``cli/report.py``, would take that name in this package.)"""
    from ..render.text import shown  # a name in a message may hold an escape sequence

    err = sys.stderr
    for line in error.details:
        err.write(f"  | {shown(line)}\n")
    err.write(f"iket: error: {shown(error.message)}\n")
    if error.hint:
        err.write(f"iket: hint: {shown(error.hint)}\n")
    err.flush()


def _from_click(error: click.ClickException) -> IketError:
    """click's own usage errors (an unknown option, a bad value) in iket's one-line form."""
    context = getattr(error, "ctx", None)
    where = context.command_path if context is not None else "iket"
    return IketError(error.format_message(), hint=f"see '{where} --help'", exit_code=error.exit_code)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point."""
    if argv is None:  # the command itself, not a caller's process
        from ..render import streams

        streams.prepare()
    try:
        result = cli.main(
            args=list(argv) if argv is not None else None, prog_name="iket", standalone_mode=False
        )
        code = result if isinstance(result, int) else ExitCode.OK
    except IketError as error:
        report_error(error)
        code = error.exit_code
    except OSError as error:  # the environment's refusal (a full disk, a read-only folder), never a bug
        from ..system.filesystem import from_os_error

        converted = from_os_error(error)
        report_error(converted)
        code = converted.exit_code
    except click.exceptions.Exit as stop:
        code = stop.exit_code
    except click.exceptions.NoArgsIsHelpError as error:  # a bare `iket`: its help
        error.show()
        code = error.exit_code
    except click.ClickException as error:  # bad usage found by click: iket's one-line form too
        report_error(_from_click(error))
        code = error.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        sys.stderr.write("iket: interrupted\n")
        code = ExitCode.INTERRUPTED
    except Terminated as stop:
        sys.stderr.write(f"iket: stopped by {stop.signum.name}\n")
        code = 128 + stop.signum
    if argv is None:
        unwritten = streams.flush_stdout()
        if unwritten is not None:
            report_error(unwritten)
            code = code or unwritten.exit_code
        _exit_on_stop_signals(int(code))
    sys.exit(int(code))


def _exit_on_stop_signals(code: int) -> None:
    """The outcome is decided: a stop signal from here on (a Ctrl-C while Python joins its
    threads and exits) ends the process at once with that outcome's exit code, not with
    a traceback or as killed by the signal. Python's finalisation puts its own handlers back
    to the default (death by the signal) after the exit functions ran: from the first of
    them on, the stop signals are ignored instead."""
    import atexit
    import os
    import signal

    from ..system.signals import ALL_STOPS

    def leave(signum, frame):
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)

    for signum in ALL_STOPS:
        signal.signal(signum, leave)
    atexit.register(lambda: [signal.signal(signum, signal.SIG_IGN) for signum in ALL_STOPS])
