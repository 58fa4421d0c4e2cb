"""``iket lint``'s output: each finding as a warning line, or the findings as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO

from ..analysis.lint import Linted
from .tables import lint_lines


def _text(processes: list[Linted], out: IO[str]) -> None:
    for process in processes:
        for line in lint_lines(process.findings):
            out.write(f"{process.process}: {line}\n")
    if not any(p.findings for p in processes):
        out.write("iket: no instrumentation problem found\n")


def _json(processes: list[Linted], out: IO[str]) -> None:
    out.write(json.dumps({"processes": [p.to_dict() for p in processes]}, indent=2) + "\n")


#: ``--format`` -> writer (the choices are ``vocab.LINT_FORMATS``).
WRITERS: dict[str, Callable[[list[Linted], IO[str]], None]] = {"text": _text, "json": _json}
