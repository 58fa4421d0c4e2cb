"""What a capture tells its caller while it runs: the interface between the stages and a display."""

from __future__ import annotations


class Reporter:
    """Receives a capture's events. The default says nothing; :mod:`iket_cli.render.progress`
    shows them on a terminal."""

    def phase(self, name: str) -> None:
        """A phase started: ``tracker``, ``capture``, ``postprocess``, ``overhead`` or ``publish``."""

    def output(self, line: str, *, tool: bool) -> None:
        """A line of output; ``tool`` is True for run-iket's (and iket's) own ``[run-iket]`` lines."""

    def info(self, message: str) -> None:
        """One line worth showing about how the capture is made (a reused tracker pass)."""

    def warn(self, message: str, hint: str) -> None:
        """Something the user should know about a capture that still succeeded."""
