"""iket in Jupyter and IPython: ``%load_ext iket_cli``, then ``%%iket`` around a cell.

``%%iket [-o DIR] [--clobber] [--function MODULE:FUNC --calls N|A-B] [window options]`` runs
the cell inside :func:`iket_cli.window` (or, with ``--function``, only FUNC's chosen calls made
by the cell) and returns a :class:`NotebookCapture`: the cell's result (``_``), shown as the
summary table (HTML in a notebook, text in a terminal), what was lost if anything, and the
report embedded to open offline, with a link to the ``.pftrace``. A cell that raises shows
its error as the notebook would; its evidence is kept in ``DIR.failed/``. ``%iket show DIR``
and ``%iket diff A B`` run the reading commands. docs/notebooks.md.
"""

from __future__ import annotations

import argparse
import html
import io
import re
import shlex
import sys
from typing import Any

from ..errors import IketError, UsageError
from ..pipeline.capture import Capture
from ..pipeline.window import Window, numbered, opening_refused

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: The largest report embedded in a cell's output (bigger: a link to it only).
EMBED_MAX = 8 << 20


class NotebookCapture(Capture):
    """A capture as a cell's result: its numbers (``.ranges()``, ``.range(name)``) and its view."""

    def summary(self) -> str:
        """The ``iket show`` table of the capture, as text."""
        from ..analysis.summary import summarize_capture
        from ..model.reading import open_capture
        from ..render import tables

        out = io.StringIO()  # the table says what was lost itself (its banner, its table of losses)
        tables.render_table(summarize_capture(open_capture(self.output_dir)), out)
        return _ANSI.sub("", out.getvalue())  # a kernel sets FORCE_COLOR: the HTML says it plainly

    def __repr__(self) -> str:
        return f"{self.summary()}\n{self.output_dir}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def _repr_html_(self) -> str:
        parts = [f"<pre>{html.escape(self.summary())}</pre>"]
        for process in self.instrumented:
            if process.perfetto is not None:
                name, where = html.escape(process.perfetto.name), html.escape(str(process.perfetto))
                perfetto = '<a href="https://ui.perfetto.dev" target="_blank">ui.perfetto.dev</a>'
                parts.append(f'<p><a href="{where}" download>{name}</a>: open it in {perfetto}</p>')
            if process.html is not None and process.html.stat().st_size <= EMBED_MAX:
                page = html.escape(process.html.read_text(encoding="utf-8"), quote=True)
                parts.append(f'<iframe srcdoc="{page}" style="width:100%;height:640px;border:0"></iframe>')
        return "\n".join(parts)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="%%iket", add_help=False, exit_on_error=False)
    parser.add_argument("-o", "--output-dir", default="iket-cell{n}")
    parser.add_argument("--clobber", action="store_true")
    parser.add_argument("--function", metavar="MODULE:FUNC")
    parser.add_argument("--calls")
    parser.add_argument("--max-ts-cnt-per-warp", type=int)
    parser.add_argument("--context-buffer-size")
    parser.add_argument("--log-level", default=None)
    parser.add_argument("--postprocess", default="all")
    parser.add_argument("--isolate", action="store_true")
    return parser


def _options(line: str) -> argparse.Namespace:
    try:
        args, unknown = _parser().parse_known_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as error:
        raise UsageError(
            f"%%iket {line}: {error}", hint="%%iket [-o DIR] [--clobber] [--function MODULE:FUNC]"
        ) from None
    if unknown:
        raise UsageError(f"%%iket: unknown option {unknown[0]!r}", hint="%%iket [-o DIR] [--clobber] ...")
    if args.calls is not None and args.function is None:
        raise UsageError(
            "%%iket --calls chooses calls of --function", hint="%%iket --function MODULE:FUNC --calls N"
        )
    return args


def _window(args: argparse.Namespace, where: str) -> Window:
    options = {
        "where": where,
        "clobber": args.clobber,
        "postprocess": args.postprocess,
        "max_ts_cnt_per_warp": args.max_ts_cnt_per_warp,
        "context_buffer_size": args.context_buffer_size,
    }
    if args.log_level:
        options["log_level"] = args.log_level
    return Window(args.output_dir, **options)


def run_cell(shell: Any, line: str, cell: str) -> NotebookCapture | None:
    """The cell in a window (the whole cell, or FUNC's chosen calls); its capture, or None
    where the cell raised (the shell has shown the error; the evidence is kept). With
    ``--isolate``, the cell runs in a process of its own (:mod:`.isolated_cell`)."""
    args = _options(line)
    if args.isolate:
        return _isolated(args, cell)
    refused = opening_refused()
    if refused is not None:  # before the cell runs: said once, the cell not run half-windowed
        raise refused
    first = next((text.strip() for text in cell.splitlines() if text.strip()), "")
    calls = args.calls or "1"
    what = f"{args.function} calls {calls} in " if args.function else ""
    window = _window(args, f"{what}a notebook cell: {first[:60]}")
    if args.function:
        from .calls import windowed_calls

        with windowed_calls(args.function, calls, window) as chosen:
            result = shell.run_cell(cell, store_history=False)
        if result.success and not chosen.opened:
            raise UsageError(
                f"{args.function} was called {chosen.seen} time(s) in the cell; --calls needs {calls}"
            )
    else:
        window.__enter__()
        result = shell.run_cell(cell, store_history=False)
        error = result.error_in_exec or result.error_before_exec
        window.__exit__(type(error) if error else None, error, None)
    if window.capture is None:
        return None
    return NotebookCapture(window.capture.output_dir, window.capture.manifest)


def _isolated(args: argparse.Namespace, cell: str) -> NotebookCapture | None:
    """The cell's ``%%iket`` line run on it by a child (its folder's ``{n}`` taken here)."""
    from . import isolated_cell

    _, output = numbered(args.output_dir)
    words = ["-o", output, *(["--clobber"] if args.clobber else []), "--postprocess", args.postprocess]
    given = {
        "--function": args.function,
        "--calls": args.calls,
        "--log-level": args.log_level,
        "--max-ts-cnt-per-warp": args.max_ts_cnt_per_warp,
        "--context-buffer-size": args.context_buffer_size,
    }
    for flag, value in given.items():
        words += [flag, str(value)] if value is not None else []
    folder = isolated_cell.run(shlex.join(words), cell, output)
    if folder is None:
        return None
    from ..model import manifest as manifest_mod

    return NotebookCapture(folder, manifest_mod.read(folder))


def reading(line: str) -> str:
    """``%iket show DIR ...``, ``%iket diff A B ...``: the reading command's output (its own
    process: the CLI as a user runs it)."""
    from ..system import spawn

    try:
        words = shlex.split(line)
    except ValueError as error:
        raise UsageError(f"%iket {line}: {error}", hint="%iket show DIR, %iket diff A B") from None
    if not words or words[0] not in ("show", "diff", "lint", "report"):
        raise UsageError(
            f"%iket {line}: not a reading command", hint="%iket show DIR, %iket diff A B, %iket lint DIR"
        )
    done = spawn.run([sys.executable, "-m", "iket_cli", *words])
    return done.stdout + done.stderr


def load(ipython: Any) -> None:
    """Register ``%%iket`` and ``%iket`` (``%load_ext iket_cli``)."""
    from IPython.core.magic import Magics, line_cell_magic, magics_class

    @magics_class
    class IketMagics(Magics):
        @line_cell_magic
        def iket(self, line: str, cell: str | None = None) -> Any:
            try:
                if cell is None:
                    sys.stdout.write(reading(line))
                    return None
                return run_cell(self.shell, line, cell)
            except IketError as error:  # one line, as the CLI says it: no traceback
                hint = f"\n  hint: {error.hint}" if error.hint else ""
                sys.stderr.write(f"iket: error: {error.message}{hint}\n")
                return None

    ipython.register_magics(IketMagics)


if __name__ == "__main__":  # a cell of %%iket --isolate, in its own process
    from .isolated_cell import main

    sys.exit(main(sys.argv[1], run_cell))
