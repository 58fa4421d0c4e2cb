"""What ``iket profile`` shows a person on stderr while and after it captures.

On a terminal: a live line with the phase running now and the elapsed time, the workload's
own output above it, and at the end a table of artifacts per process. Plain lines when
stderr is not a terminal, with ``--quiet`` (errors only) or with ``NO_COLOR`` set. rich is
imported only when something is shown.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from typing import IO, Any

from ..capture.events import Reporter
from ..model.completeness import headline, of_process
from ..model.folder import Capture
from ..model.manifest import instrumented, replay_line
from ..model.names import short
from ..model.units import human_bytes
from ..model.vocab import MANIFEST_NAME, TIMER_STEP_NS
from .text import shown

#: Said once when the tracker pass starts: why the workload's output comes twice.
TWICE = (
    "the workload runs twice: the tracker pass sizes the trace buffer, then the capture pass "
    "records the trace (each prints its output)"
)
#: Kernels named per process in the summary; the rest are counted (a warp trace has dozens).
SHOWN_KERNELS = 4
#: On a terminal, each line the workload prints is tagged with the pass that printed it.
PASS_TAGS = {"record": "[record run]", "tracker": "[tracker pass]", "capture": "[capture pass]"}
PHASE_LABELS = {
    "record": "record run (--extract, without run-iket)",
    "tracker": "tracker pass",
    "capture": "capture pass",
    "postprocess": "postprocess",
    "overhead": "--overhead run (warp trace)",
    "publish": "publishing",
}


def fancy_allowed(stream: IO[str]) -> bool:
    """Live displays only on a real terminal, and never with NO_COLOR."""
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


class ConsoleReporter(Reporter):
    """Renders capture events. ``workload_out`` receives the workload's own lines."""

    def __init__(self, *, quiet: bool, verbose: bool, workload_out: IO[str]) -> None:
        self.quiet = quiet
        self.verbose = verbose
        self.workload_out = workload_out
        self.fancy = not quiet and fancy_allowed(sys.stderr)
        self._status: Any = None
        self._phase_started = time.monotonic()
        self._started = time.monotonic()
        self._phase = "starting"
        self._closed: set = set()

    # -- live line --------------------------------------------------------------------
    def __enter__(self) -> ConsoleReporter:
        if self.fancy:
            from rich.status import Status

            from .text import rich_console

            reporter = self

            class _Line:  # re-rendered on every refresh, so the elapsed time runs
                def __rich__(self) -> str:
                    return reporter._status_text()

            self._console = rich_console(stderr=True)
            self._status = Status(_Line(), console=self._console)
            self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _status_text(self) -> Any:
        """The live line as styled text (no markup to parse: a dumb terminal shows it as words)."""
        from rich.text import Text

        total = time.monotonic() - self._started
        return Text.assemble(
            ("iket", "bold"), f" {PHASE_LABELS.get(self._phase, self._phase)} · {total:0.1f} s"
        )

    # -- Reporter -----------------------------------------------------------------------
    def phase(self, name: str) -> None:
        now = time.monotonic()
        if not self.quiet and not self.fancy and self._phase in PHASE_LABELS:
            say(f"iket: {PHASE_LABELS[self._phase]} done in {now - self._phase_started:.2f} s")
        self._phase, self._phase_started = name, now
        if name == "tracker" and not self.quiet:
            self._note(TWICE)
        if self._status is None and not self.quiet:
            say(f"iket: {PHASE_LABELS.get(name, name)}...")

    def _note(self, text: str) -> None:
        if self._status is not None:
            self._console.print(f"iket: {shown(text)}", markup=False, highlight=False, style="dim")
        else:
            say(f"iket: {text}")

    def info(self, message: str) -> None:
        if not self.quiet:
            self._note(message)

    def output(self, line: str, *, tool: bool) -> None:
        if tool and not self.verbose:
            return
        if self._status is not None:  # a terminal: each workload line says which pass printed it
            tagged = line if tool or self._phase not in PASS_TAGS else f"{PASS_TAGS[self._phase]} {line}"
            self._console.print(tagged, markup=False, highlight=False, style="dim" if tool else None)
            return
        stream = sys.stderr if tool else self.workload_out
        if stream in self._closed:
            return
        try:
            stream.write(line + "\n")
            stream.flush()
        except (BrokenPipeError, ValueError):  # `iket profile ... | head`: keep capturing, stop echoing
            self._closed.add(stream)

    def warn(self, message: str, hint: str) -> None:
        if self.quiet:
            return
        if self._status is not None:
            self._status.stop()
            self._status = None
        say(f"iket: warning: {message}")
        say(f"iket: hint: {hint}")

    # -- the end -----------------------------------------------------------------------
    def summary(self, capture: Capture) -> None:
        """A short table of artifacts per process and what to open."""
        if self.quiet:
            return
        record = capture.manifest
        took = record["duration_s"]
        first = [p for p in record["processes"] if p.get("repeat", 1) == 1]  # repeats: one line
        listed = instrumented(first)
        rows = [_row(capture, p) for p in listed]
        idle = _idle_note([p for p in first if p not in listed])
        if self.fancy:
            self._rich_summary(capture, rows, took, idle)
            return
        say(f"iket: captured {len(rows)} process(es) in {took:.1f} s into {capture.output_dir}")
        for pid, kernels, counts, files in rows:
            say(f"  pid {pid}: {kernels}; {counts}; {files}")
        say(f"iket: {phase_line(record)}")
        for line in (headline(record), replay_line(record), repeat_line(record), idle):  # where said
            if line:
                say(f"iket: {line}")
        for line in _overhead_lines(record):
            say(f"iket: overhead: {line}")
        say(f"iket: open {_what_to_open(capture)}")

    def _rich_summary(self, capture: Capture, rows: list[tuple[str, ...]], took: float, idle: str) -> None:
        from rich.table import Table

        from .text import markup

        table = Table(title=f"iket capture · {took:.1f} s · {markup(str(capture.output_dir))}")
        for column in ("pid", "kernels", "recorded", "artifacts"):
            table.add_column(column)
        for row in rows:
            table.add_row(*(markup(cell) for cell in row))
        self._console.print(table)
        if idle:
            self._console.print(markup(idle))
        self._console.print(markup(phase_line(capture.manifest)))
        lost = headline(capture.manifest)
        if lost:
            self._console.print(f"[bold red]{markup(lost)}[/]")
        for line in (repeat_line(capture.manifest), replay_line(capture.manifest)):
            if line:
                self._console.print(markup(line))
        for line in _overhead_lines(capture.manifest):
            self._console.print(f"overhead: {markup(line)}")
        self._console.print(f"open [bold]{markup(_what_to_open(capture))}[/]")


def repeat_line(record: dict[str, Any]) -> str:
    """``5 repeats (capture pass 7.10, 3.21, ... s): 4 ok, 1 failed``; "" for one capture."""
    done = record.get("repeats") or []
    if len(done) < 2:
        return ""
    seconds = ", ".join("-" if r["capture_s"] is None else f"{r['capture_s']:.2f}" for r in done)
    verdict = ", ".join(f"{n} {status}" for status, n in Counter(r["status"] for r in done).items())
    return f"{len(done)} repeats (capture pass {seconds} s): {verdict}; iket show pools them"


def _row(capture: Capture, info: dict[str, Any]) -> tuple[str, str, str, str]:
    names = [k.get("short") or short(k["name"]) for k in info["kernels"]]
    more = f" and {len(names) - SHOWN_KERNELS} more (iket show)" if len(names) > SHOWN_KERNELS else ""
    kernels = ", ".join(names[:SHOWN_KERNELS]) + more or "-"
    counts = counted(info)
    if of_process(capture.manifest, info["pid_hex"]):
        counts += " · INCOMPLETE"
    files = "  ".join(f"{a['path']} ({human_bytes(a['bytes'])})" for a in info["artifacts"].values())
    return info["pid_hex"], kernels, counts, files


#: How the console names what a process recorded: (manifest key, one, many).
_COUNTED = (("launches", "launch", "launches"), ("ranges", "range", "ranges"), ("markers", "mark", "marks"))


def counted(info: dict[str, Any]) -> str:
    """``27 launches · 0 ranges · 0 marks``: labelled counts ("-" where unknown)."""
    parts = []
    for key, one, many in _COUNTED:
        value = info.get(key)
        parts.append(f"- {many}" if value is None else f"{value:,} {one if value == 1 else many}")
    return " · ".join(parts)


def phase_line(record: dict[str, Any]) -> str:
    """The manifest's phase times, as the console's last word on them."""
    phases = record.get("phases") or {}
    parts = [
        f"{PHASE_LABELS.get(name, name).split(' (')[0]} {seconds:.2f} s"
        for name, seconds in phases.items()
        if seconds is not None and name in PHASE_LABELS
    ]
    return "phases: " + (" · ".join(parts) or "-") + f" (of {record['duration_s']:.2f} s, manifest.json)"


def _overhead_lines(record: dict[str, Any]) -> list[str]:
    """What ``--overhead`` found, one line per kernel (nothing without --overhead)."""
    found = record.get("overhead")
    if not found or found.get("error"):
        return []  # an error was already shown as a warning
    return [overhead_line(row) for row in found["kernels"]]


def overhead_line(row: dict[str, Any]) -> str:
    """One line for the console: ``kernel: 1.23 µs → 1.50 µs (+22%, 4.1 ns/event)``."""
    share = "" if row["overhead_share"] is None else f"{row['overhead_share']:+.0%}"
    per_event = "" if row["ns_per_event"] is None else f", {row['ns_per_event']:.1f} ns per event"
    if row["at_resolution_limit"]:
        per_event = f", within the timer's {TIMER_STEP_NS} ns step: too small to measure"
    return (
        f"{short(row['kernel'])}: {row['uninstrumented_ns']:,} ns without instrumentation, "
        f"{row['instrumented_ns']:,} ns with ({share}{per_event}; median of "
        f"{row['uninstrumented_launches']} and {row['launches']} launches)"
    )


def _idle_note(idle: list[dict[str, Any]]) -> str:
    """One line on the CUDA processes that launched no instrumented kernel (e.g. torchrun's agent)."""
    if not idle:
        return ""
    named = ", ".join(
        f"{p['pid_hex']} ({' '.join((p.get('labels') or {}).get('argv') or [])[:60] or 'not Python'})"
        for p in idle
    )
    return f"{len(idle)} more CUDA process(es) launched no instrumented kernel: {named}"


def _what_to_open(capture: Capture) -> str:
    """The offline report first (any browser, no network), else the Perfetto trace."""
    for process in capture.instrumented:
        if process.html is not None:
            also = f", or {process.perfetto.name} in https://ui.perfetto.dev" if process.perfetto else ""
            return f"{process.html} in a browser (works offline){also}"
        if process.perfetto is not None:
            return f"{process.perfetto} in https://ui.perfetto.dev"
        if process.trace_json is not None:
            return str(process.trace_json)
    return str(capture.output_dir / MANIFEST_NAME)


def say(text: str) -> None:
    """One line of iket's own on stderr (names in it shown safely: :mod:`.text`)."""
    sys.stderr.write(shown(text) + "\n")
    sys.stderr.flush()


class PrefixReporter(Reporter):
    """Plain lines, each prefixed with the job's name, so concurrent jobs stay readable."""

    _lock = threading.Lock()

    def __init__(self, name: str, quiet: bool) -> None:
        self.name, self.quiet = name, quiet

    def _say(self, text: str, *, workload: bool = False) -> None:
        """A line of iket's own (names shown safely), or of the workload (as it printed it)."""
        if not self.quiet:
            with self._lock:
                sys.stderr.write(f"[{self.name}] {text if workload else shown(text)}\n")
                sys.stderr.flush()

    def phase(self, name: str) -> None:
        self._say(f"iket: {name}")

    def output(self, line: str, *, tool: bool) -> None:
        if not tool:
            self._say(line, workload=True)

    def info(self, message: str) -> None:
        self._say(f"iket: {message}")

    def warn(self, message: str, hint: str) -> None:
        self._say(f"iket: warning: {message} ({hint})")
