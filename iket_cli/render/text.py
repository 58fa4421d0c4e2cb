"""Text from a capture, made safe to show on a terminal.

Kernel, range and mark names, file names and paths come from traces and folders that anyone
may have written. Shown raw, an escape sequence in a name clears the screen, retitles the
window or writes the clipboard (OSC 52); ``[/bad]`` is rich markup (an error, or a style);
``:x:`` becomes an emoji. Every console renderer shows such text through :func:`shown`
(plain lines) or :func:`markup` (rich markup), and makes its rich console with
:func:`rich_console` (no emoji codes). Machine output (``--format json`` and ``csv``) keeps the
names as they are: JSON escapes control characters, and CSV is data.
"""

from __future__ import annotations

import re
from typing import IO, Any

#: C0 and C1 control characters (but newline), DEL, the bidirectional overrides that can
#: make a name read backwards on screen, and lone surrogates (a file name's undecodable bytes:
#: no stream can write them).
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _spelled(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, *, lines: bool = False) -> str:
    """``text`` with every control character spelled out (``\\x1b``); a newline too, unless
    ``lines`` (a message of several lines)."""
    spelled = _CONTROL.sub(_spelled, str(text))
    return spelled if lines else spelled.replace("\n", "\\n")


def markup(text: object) -> str:
    """``text`` for a place rich reads as markup: shown, with its brackets escaped."""
    from rich.markup import escape

    return escape(shown(text))


class _Spelled:
    """A terminal's stream whose text has its control characters spelled out."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(shown(text, lines=True))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def for_terminal(stream: IO[str]) -> IO[str]:
    """``stream`` for machine output (CSV, markdown), which keeps names as they are in a pipe or
    a file; where it is a terminal, a stream that spells their control characters out."""
    isatty = getattr(stream, "isatty", None)
    return _Spelled(stream) if isatty is not None and isatty() else stream  # type: ignore[return-value]


def rich_console(file: IO[str] | None = None, **options: Any):
    """A rich console that reads no ``:emoji:`` codes (a name may hold ``:x:``) and writes to
    its file even inside a Jupyter kernel (where rich would display instead)."""
    from rich.console import Console

    options.setdefault("force_jupyter", False)
    return Console(file=file, emoji=False, **options)
