"""The signals that stop iket, turned into exceptions, and held while a capture is published.

SIGINT is Python's KeyboardInterrupt already. SIGTERM (a scheduler's stop, ``kill``), SIGHUP
(an ssh connection that drops) and SIGQUIT (Ctrl-\\ at a terminal) would kill the CLI on the
spot, with no chance to stop the capture's processes or keep its evidence: while a capture
or a decode runs they raise :class:`~iket_cli.errors.Terminated` in the main thread instead,
and the CLI exits 128 + the signal, as a shell reports a process killed by it.

A capture published by an atomic exchange is complete the moment the exchange is done: a
stop signal that arrives between the exchange and the end of the command must not report
"interrupted" about a directory that holds the new capture. :class:`Publishing` holds the
signals across that stretch and tells which arrived.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from ..errors import Terminated

#: The signals iket handles as SIGTERM: each raises :class:`Terminated` with its number.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Every signal a terminal, a shell or a scheduler uses to stop iket.
ALL_STOPS = (signal.SIGINT, *STOP_SIGNALS)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def as_exception() -> Iterator[None]:
    """Turn SIGTERM, SIGHUP and SIGQUIT into :class:`Terminated` (main thread only; elsewhere
    a no-op, as Python delivers signals to the main thread)."""
    if not _main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated(signum)

    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, before in previous.items():
            if signal.getsignal(signum) is handler:  # else a published capture's hold took over
                signal.signal(signum, before)


class Publishing:
    """Holds the stop signals from :meth:`hold` (just before a capture is published) to the
    end of the ``with`` block: one that arrives meanwhile is recorded in ``arrived`` (for a
    warning), not acted on. Python runs signal handlers in the main thread whichever thread
    the signal reached, so swapping the handlers holds them for the whole process. Outside
    the main thread it does nothing (a job of ``iket run``: its Ctrl-C reaches the main
    thread, which cancels the job).

    ``until_exit``: once published, the hold lasts until the process exits, not until the
    block ends: the CLI, which ends right after the capture (``cli.main`` then puts its own
    handlers in), so that a stop signal then leaves a command that succeeded; the Python
    API's caller goes on, and gets its handlers back."""

    def __init__(self, *, until_exit: bool = False) -> None:
        self.until_exit = until_exit
        self.arrived: list[signal.Signals] = []
        #: What was published, once it was: a stop signal from then on only adds to ``arrived``.
        self.published: Any = None
        self._previous: dict[int, object] = {}

    def hold(self) -> None:
        if not _main_thread() or self._previous:
            return

        def record(signum, frame):
            self.arrived.append(signal.Signals(signum))

        self._previous = {signum: signal.signal(signum, record) for signum in ALL_STOPS}

    def __enter__(self) -> Publishing:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.until_exit and self.published is not None:
            return  # the CLI's main replaces the recording handlers as it exits
        previous, self._previous = self._previous, {}
        for signum, before in previous.items():
            signal.signal(signum, before)


def ended_by(returncode: int) -> str:
    """How a child ended, said for a person: ``SIGSEGV (signal 11)``, or ``exit status 3``."""
    if returncode < 0:
        try:
            return f"{signal.Signals(-returncode).name} (signal {-returncode})"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"
