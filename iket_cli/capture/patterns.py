"""Output name patterns for ``-o``, as nsys has them.

``%h`` hostname, ``%p`` the CLI's pid, ``%n`` the next free number (``run-%n`` gives
``run-1``, then ``run-2``, ...), ``%t`` a timestamp (``20261202-181800``), ``%q{VAR}`` an
environment variable (``%q{SLURM_PROCID}``), ``%%`` a literal ``%``. An unknown pattern, or
a ``%q{}`` whose variable is unset or empty, is a usage error (exit 2).
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

from ..errors import UsageError
from ..model.vocab import FAILED_SUFFIX

_TOKEN = re.compile(r"%(q\{([^}]*)\}|.?)")


def expand(pattern: str, *, env: dict[str, str], base: Path | None = None) -> str:
    """``pattern`` with every ``%`` code replaced; ``base`` resolves a relative ``%n`` path."""

    def one(match: re.Match) -> str:
        code, var = match[1], match[2]
        if code == "%":
            return "%"
        if code == "h":
            return socket.gethostname().split(".")[0]
        if code == "p":
            return str(os.getpid())
        if code == "t":
            return time.strftime("%Y%m%d-%H%M%S")
        if code == "n":
            return "\0n"  # filled in below, once the rest of the path is known
        if code.startswith("q{"):
            if not var:
                raise UsageError("-o pattern %q{} names no variable", hint="e.g. %q{SLURM_PROCID}")
            if not env.get(var):
                raise UsageError(
                    f"-o pattern %q{{{var}}}: {var} is not set", hint=f"export {var}, or drop it"
                )
            return env[var]
        shown = f"%{code}" if code else "a trailing %"
        raise UsageError(f"unknown -o pattern {shown}", hint="use %h %p %n %t %q{VAR} or %% for a literal %")

    text = _TOKEN.sub(one, pattern)
    if "\0n" not in text:
        return text
    root = base or Path.cwd()
    for number in range(1, 1_000_000):
        candidate = text.replace("\0n", str(number))
        path = Path(candidate) if Path(candidate).is_absolute() else root / candidate
        if not path.exists() and not path.with_name(path.name + FAILED_SUFFIX).exists():
            return candidate
    raise UsageError(f"-o pattern {pattern}: no free number below 1000000")
