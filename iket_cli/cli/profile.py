"""``iket profile``: capture a script, a function, a module or any command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import IketError, UsageError
from ..model.vocab import LOG_LEVELS, LOG_NAME, MANIFEST_NAME, MAX_EXTRACT, POSTPROCESS_CHOICES, TRACKER_AUTO
from . import options


def split_workload(
    args: list[str], value_options: set[str], flag_options: set[str]
) -> tuple[list[str], str, list[str]]:
    """Split ``iket profile``'s arguments into (its own options, kind, workload words).

    The target starts at ``-m MODULE``, at the first word that is not an option (a script
    or a ``:func`` target), or at a ``--`` that comes before either (then everything after
    it is a command, verbatim). iket's own options may also follow a script or module
    target (``iket profile script.py -o DIR``); any other word goes to the workload, and a
    ``--`` after the target passes everything after it to the workload verbatim.
    """
    own: list[str] = []
    i, kind, workload = 0, None, []
    while i < len(args):
        word = args[i]
        if word == "--":
            if kind is None:
                return own, "command", args[i + 1 :]
            return own, kind, workload + args[i + 1 :]
        name = word.split("=", 1)[0]
        if kind is None and word in ("-m", "--module"):
            if i + 1 >= len(args):
                raise UsageError(f"{word} needs a module name", hint="iket profile -m pkg.module")
            kind, workload, i = "module", [args[i + 1]], i + 2
            continue
        if kind is None and name == "--module":
            kind, workload, i = "module", [word.split("=", 1)[1]], i + 1
            continue
        if kind is None and word.startswith("-m") and not word.startswith("--") and len(word) > 2:
            kind, workload, i = "module", [word[2:]], i + 1
            continue
        if name in value_options or _short_with_value(word, value_options):
            step = 1 if "=" in word or _short_with_value(word, value_options) else 2
            own += args[i : i + step]
            i += step
            continue
        if word in flag_options or kind is None:
            own.append(word)  # a flag of iket's (or an unknown option: click reports it)
        else:
            workload.append(word)
        if kind is None and not word.startswith("-"):
            own.pop()
            kind, workload = "positional", [word]
        i += 1
    return own, kind or "positional", workload


def _short_with_value(word: str, value_options: set[str]) -> bool:
    """``-oDIR``: a short option with its value attached."""
    return len(word) > 2 and word[0] == "-" and word[1] != "-" and word[:2] in value_options


class ProfileCommand(click.Command):
    """A click command whose trailing words are the workload, parsed by :func:`split_workload`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options = [p for p in self.params if isinstance(p, click.Option)]
        values = {n for p in options if not (p.is_flag or p.count) for n in p.opts}
        flags = {n for p in options if p.is_flag or p.count for n in [*p.opts, *p.secondary_opts]}
        flags |= {"-h", "--help"}
        own, kind, workload = split_workload(list(args), values, flags)
        if not any(w in ("-h", "--help") for w in own):
            ctx.meta["iket.workload"] = (kind, workload)
        return super().parse_args(ctx, own)


def _env_pair(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict:
    env = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--env")
        env[key] = value
    return env


@click.command(
    "profile",
    cls=ProfileCommand,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(path_type=Path),
    help="Where the capture goes. Default: iket-<target stem> here.",
)
@click.option(
    "--clobber", is_flag=True, help="Replace a previous capture in DIR, once the new one has succeeded."
)
@click.option(
    "--postprocess",
    type=click.Choice(POSTPROCESS_CHOICES),
    default="all",
    show_default=True,
    help="Artifacts to write per process.",
)
@click.option("--keep", is_flag=True, help="Keep run-iket's tracker/, gen-config/ and iket/.")
@click.option(
    "--timeout",
    type=options.Seconds(),
    metavar="SECONDS",
    help="Kill the whole process tree after this many seconds (exit 124).",
)
@click.option(
    "--env",
    "env",
    multiple=True,
    callback=_env_pair,
    metavar="KEY=VALUE",
    help="Set an environment variable in both passes (repeatable).",
)
@click.option(
    "--cwd", type=click.Path(file_okay=False, path_type=Path), help="Working directory of the workload."
)
@click.option(
    "--python",
    "python",
    metavar="PYTHON",
    help="Interpreter for script, function and -m targets. Default: iket's own.",
)
@click.option("--run-iket", "run_iket", metavar="PATH", help="The run-iket to use.")
@click.option(
    "--max-ts-cnt-per-warp",
    type=click.IntRange(min=1),
    help="Timestamps per warp to allocate (default: from the tracker pass).",
)
@click.option("--warp-trace", is_flag=True, help="Warp lifetimes only; no tracker pass.")
@click.option(
    "--tracker",
    default=TRACKER_AUTO,
    show_default=True,
    metavar="auto|fresh|DIR",
    help="auto: reuse the tracker pass of the last capture of the same command (the workload "
    "then runs once); fresh: always run it; DIR: a kept capture's tracker/ folder.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="Capture N times after one tracker pass: the run-to-run spread per range (iket show) "
    "and a diff gate that knows the noise (iket diff).",
)
@click.option("--enabled-cluster", metavar="X,Y,Z", help="Dump only this cluster.")
@click.option(
    "--enabled-cluster-config",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Per-kernel cluster selection (JSON).",
)
@click.option(
    "--context-buffer-size",
    metavar="SIZE",
    help="Device buffer per context, e.g. 512M (default: from the tracker pass).",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    help="run-iket's log level (default info: IKET says what it lost there; its lines go to iket.log).",
)
@click.option("--strict", is_flag=True, help="Exit 1 when the tracker and capture passes differ.")
@click.option(
    "--max-buffer",
    metavar="SIZE",
    help="Stop before the capture pass if run-iket would allocate a larger trace buffer.",
)
@click.option(
    "--overhead",
    is_flag=True,
    help="Also time the kernels without instrumentation (one more run, --warp-trace) and report the cost.",
)
@click.option(
    "--warm/--no-warm",
    default=True,
    show_default=True,
    help="Script and function targets: import torch for the second pass while the first one runs.",
)
@click.option(
    "--roles",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Warp roles to keep with the capture (CuTe DSL's kernel_symbols.json; "
    "default: the one the workload writes).",
)
@click.option(
    "--keep-dsl-cache",
    is_flag=True,
    help="Leave CuTe DSL's compile cache on (by default iket sets CUTE_DSL_NO_CACHE=1: "
    "a kernel loaded from the cache is not instrumented).",
)
@click.option(
    "--extract",
    metavar="MODULE:FUNC",
    help="Run the workload once without run-iket, save FUNC's chosen calls (arguments and "
    "result), and capture only a replay of them: for a kernel inside a model.",
)
@click.option(
    "--window",
    metavar="MODULE:FUNC",
    help="Run the workload once, with no run-iket pass: the chosen calls of FUNC run inside IKET's "
    "in-process session (one window from the start of the first to the end of the last).",
)
@click.option(
    "--one-pass",
    is_flag=True,
    help="The whole run of a Python workload in one in-process session: no tracker pass, no relaunch.",
)
@click.option(
    "--calls",
    default="1",
    show_default=True,
    metavar="N|A-B|last",
    help="--extract or --window: which calls of FUNC (last, --extract only: run to the end, keep the last).",
)
@click.option(
    "--max-extract",
    default=MAX_EXTRACT,
    show_default=True,
    metavar="SIZE",
    help="--extract: stop (exit 1) if the saved calls would take more than this.",
)
@click.option(
    "--extract-rank",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="--extract/--window with several processes: the rank that records (else the first to call FUNC).",
)
@click.option(
    "--stop-after/--no-stop-after",
    default=True,
    show_default=True,
    help="--extract/--window: end the run once the last chosen call is saved.",
)
@click.option(
    "--replay",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Capture again from the calls saved in capture DIR (no record run; default -o DIR-replay). "
    "Only calls you recorded on this machine, unless --trust-replay.",
)
@click.option(
    "--trust-replay",
    is_flag=True,
    help="--replay saved calls recorded elsewhere or by someone else: it imports FUNC's module from "
    "their source root and loads their values (docs/faults.md says what is still checked).",
)
@click.option("-q", "--quiet", is_flag=True, help="Only errors and the workload's output.")
@click.option("-v", "--verbose", is_flag=True, help="Also show run-iket's own lines.")
@options.json_output
@click.pass_context
def command(ctx: click.Context, **kw: object) -> int:
    """Capture an IKET timeline.

    \b
    iket profile [OPTIONS] script.py [ARGS]...      run a script
    iket profile [OPTIONS] script.py:func           import it, call func()
    iket profile [OPTIONS] pkg.module:func          import a module, call func()
    iket profile [OPTIONS] -m module [ARGS]...      run a module
    iket profile [OPTIONS] -- COMMAND [ARGS]...     run any command
    iket profile [OPTIONS] TARGET --extract MODULE:FUNC   capture FUNC's call alone
    iket profile [OPTIONS] TARGET --window MODULE:FUNC    ... in the live process, one run
    iket profile [OPTIONS] TARGET --one-pass        the whole run, one in-process session
    iket profile --replay DIR -o NEW                capture DIR's saved calls again
    """
    from ..capture import targets
    from ..model.units import parse_size
    from ..pipeline.profile import profile
    from ..render import streams
    from ..render.progress import ConsoleReporter
    from ..system.tree import become_subreaper

    kind, words = ctx.meta.get("iket.workload", ("positional", []))
    if kw.get("replay") is not None and words:
        raise UsageError(
            "--replay DIR replays DIR's saved calls: give no target", hint="iket profile --replay DIR -o NEW"
        )
    target = None if kw.get("replay") is not None else targets.parse(kind, words)
    as_json = bool(kw.pop("as_json"))
    if kw.get("max_buffer") is not None:
        kw["max_buffer"] = parse_size(str(kw["max_buffer"]))
    quiet, verbose = bool(kw.pop("quiet")), bool(kw.pop("verbose"))
    if quiet and verbose:
        raise UsageError("--quiet and --verbose cannot go together", hint="choose one of them")
    output_dir = kw.pop("output_dir")
    reporter = ConsoleReporter(
        quiet=quiet, verbose=verbose, workload_out=sys.stderr if as_json else sys.stdout
    )
    become_subreaper()
    try:
        with reporter:
            argv = ["iket", *sys.argv[1:]]
            capture = profile(target, output_dir, reporter=reporter, command=argv, hold_until_exit=True, **kw)
    except IketError as error:
        kept = getattr(error, "published", None) or error.failed_dir  # --strict's incomplete capture
        if as_json and kept is not None and (kept / MANIFEST_NAME).is_file():
            sys.stdout.write((kept / MANIFEST_NAME).read_text())  # CI reads it too
        raise
    reporter.summary(capture)
    unshown = None if as_json else streams.take_stdout_error()
    if unshown is not None:
        reporter.warn(
            f"the workload's output could not be shown ({unshown}); it is all in "
            f"{capture.output_dir / LOG_NAME}",
            "nothing to do: the capture is complete",
        )
    if as_json:
        sys.stdout.write(json.dumps(capture.manifest, indent=2) + "\n")
    return 0
