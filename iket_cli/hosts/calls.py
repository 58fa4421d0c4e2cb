"""A window around chosen calls of a function, in this process (``%%iket --function``).

FUNC is replaced in its module (or class) for the length of a block by a wrapper that counts
its calls and holds the window open from the start of the first chosen call to the end of the
last, as ``--window`` does in a run of its own (``capture/_hook/iket_window.py``). Code that
bound FUNC to a name of its own before the block (``from kernels import launch``) keeps
calling the original: name it through its module (``kernels.launch``), or window the cell.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..capture.saved_calls.extract import parse_calls
from ..errors import UsageError
from ..pipeline.window import Window


@dataclass
class Chosen:
    """What the block's calls of FUNC did: how many were seen, whether the window opened."""

    seen: int = 0
    opened: bool = False


def _owner(function: str) -> tuple[Any, str]:
    module, sep, qualname = function.rpartition(":")
    if not sep or not module:
        raise UsageError(f"--function {function!r} is not MODULE:FUNC", hint="e.g. --function kernels:launch")
    try:
        owner = importlib.import_module(module)
    except Exception as error:  # a module that raises at import: said in one line
        raise UsageError(
            f"--function {function}: cannot import {module}: {type(error).__name__}: {error}",
            hint="fix the module (import it in a cell of its own to see its traceback)",
        ) from None
    *classes, name = qualname.split(".")
    for part in classes:
        owner = getattr(owner, part, None)
    if owner is None or not callable(getattr(owner, name, None)):
        raise UsageError(f"--function {function}: no function {qualname} in {module}")
    return owner, name


@contextlib.contextmanager
def windowed_calls(function: str, calls: str, window: Window) -> Iterator[Chosen]:
    """FUNC wrapped for the block: its chosen calls (``N`` or ``A-B``) inside ``window``."""
    chosen_calls = parse_calls(calls)
    if chosen_calls == "last":
        raise UsageError(
            "--calls last cannot open a window: it opens as its call begins", hint="give N or A-B"
        )
    owner, name = _owner(function)
    original = getattr(owner, name)
    first, last = chosen_calls[0], chosen_calls[-1]
    chosen = Chosen()

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        chosen.seen += 1
        number = chosen.seen
        if number == first:
            window.calls = {
                "function": function,
                "asked": [first, last],
                "calls": [first, last],
                "seen": last,
            }
            window.__enter__()
            chosen.opened = True
        try:
            result = original(*args, **kwargs)
        except BaseException as error:
            if first <= number <= last:
                window.__exit__(type(error), error, None)
            raise
        if number == last:
            window.__exit__(None, None, None)
        return result

    setattr(owner, name, wrapper)
    try:
        yield chosen
    finally:
        setattr(owner, name, original)
        if chosen.opened and window.capture is None and chosen.seen < last:  # the block ended inside it
            window.calls = {**(window.calls or {}), "calls": [first, chosen.seen], "seen": chosen.seen}
            window.__exit__(None, None, None)
