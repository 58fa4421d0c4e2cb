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
        if not _held_to_exit:  # else a published capture's hold stays (see hold_until_exit)
            for signum, before in previous.items():
                signal.signal(signum, before)


#: Whether a published capture's hold lasts until the process exits (the CLI, which ends right
#: after it: ``cli.main`` then puts its own handlers in), rather than until the ``with`` block
#: ends (the Python API, whose caller goes on).
_until_exit = False
#: Set once such a hold has begun: nothing puts the handlers back before the CLI exits.
_held_to_exit = False


def hold_until_exit() -> None:
    """Called by the CLI before a capture: once published, a stop signal before the process
    exits is only recorded (the capture stands; the command ends with success)."""
    global _until_exit
    _until_exit = True


class Publishing:
    """Holds the stop signals from :meth:`hold` (just before a capture is published) to the
    end of the ``with`` block: one that arrives meanwhile is recorded in ``arrived`` (for a
    warning), not acted on. Python runs signal handlers in the main thread whichever thread
    the signal reached, so swapping the handlers holds them for the whole process. Outside
    the main thread it does nothing (a job of ``iket run``: its Ctrl-C reaches the main
    thread, which cancels the job)."""

    def __init__(self) -> None:
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
        global _held_to_exit
        _held_to_exit = _until_exit

    def __enter__(self) -> Publishing:
        return self

    def __exit__(self, *exc: object) -> None:
        global _held_to_exit
        if _held_to_exit and self.published is not None:
            return  # the CLI's main replaces the recording handlers as it exits
        _held_to_exit = False
        previous, self._previous = self._previous, {}
        for signum, before in previous.items():
            signal.signal(signum, before)
