"""``iket doctor``: what this machine has for IKET captures, and what is missing."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from ..errors import IketError
from . import options


@click.command("doctor")
@options.json_output
@click.option(
    "--gpu",
    is_flag=True,
    help="Also run tiny workloads (elementwise, GEMMs in fp32/bf16/fp16, attention, a TIRx and a "
    "CuTe DSL kernel) under run-iket on this GPU and say which it survives; cached per stack.",
)
@click.option("--refresh", is_flag=True, help="--gpu: probe again even if this stack's table is cached.")
def command(as_json: bool, gpu: bool, refresh: bool) -> int:
    """Check run-iket, the decoder, the GPUs and the environment. Exit 1 if a capture cannot run."""
    from ..capture import doctor

    results = doctor.checks()
    if as_json:
        checks = [asdict(c) for c in results]
        table = doctor.gpu_table(refresh=refresh) if gpu else None
        sys.stdout.write(
            json.dumps(checks if table is None else {"checks": checks, "gpu": table}, indent=2) + "\n"
        )
    else:
        for c in results:
            mark = "ok  " if c.ok else ("FAIL" if c.required else "--  ")
            sys.stdout.write(f"{mark} {c.name}: {c.detail}\n")
            if not c.ok and c.fix:
                sys.stdout.write(f"     fix: {c.fix}\n")
        sys.stdout.flush()
        if gpu:  # after the checks: a machine without a GPU still gets them
            _print_table(doctor.gpu_table(refresh=refresh))
    if not doctor.healthy(results):
        missing = ", ".join(c.name for c in results if c.required and not c.ok)
        raise IketError(f"this machine cannot capture yet: {missing}", hint="see the fixes above")
    return 0


def _print_table(table: dict) -> None:
    when = "cached" if table.get("cached") else "probed"
    sys.stdout.write(f"\nunder run-iket on this GPU ({when} {table['probed_at']}; --refresh probes again):\n")
    width = max(len(p["name"]) for p in table["probes"])
    for probe in table["probes"]:
        seconds = f"{probe['seconds']:5.1f} s" if probe["verdict"] != "skipped" else "       "
        sys.stdout.write(f"  {probe['name']:<{width}}  {probe['verdict']:<8} {seconds}  {probe['detail']}\n")
