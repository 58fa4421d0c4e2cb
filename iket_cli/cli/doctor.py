"""``iket doctor``: what this machine has for IKET captures, and what is missing."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from ..errors import IketError


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON on stdout.")
def command(as_json: bool) -> int:
    """Check run-iket, the decoder, the GPUs and the environment. Exit 1 if a capture cannot run."""
    from ..capture import doctor

    results = doctor.checks()
    if as_json:
        sys.stdout.write(json.dumps([asdict(c) for c in results], indent=2) + "\n")
    else:
        for c in results:
            mark = "ok  " if c.ok else ("FAIL" if c.required else "--  ")
            sys.stdout.write(f"{mark} {c.name}: {c.detail}\n")
            if not c.ok and c.fix:
                sys.stdout.write(f"     fix: {c.fix}\n")
    if not doctor.healthy(results):
        missing = ", ".join(c.name for c in results if c.required and not c.ok)
        raise IketError(f"this machine cannot capture yet: {missing}", hint="see the fixes above")
    return 0
