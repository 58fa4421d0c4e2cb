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
    from ..system import signals

    with signals.as_exception():  # SIGTERM, SIGHUP: a message and 143, 129, as Ctrl-C's 130
        return _doctor(as_json, gpu, refresh)


def _doctor(as_json: bool, gpu: bool, refresh: bool) -> int:
    from ..capture import doctor

    results = doctor.checks()
    if as_json:
        checks = [asdict(c) for c in results]
        if not gpu:
            sys.stdout.write(json.dumps(checks, indent=2) + "\n")
        else:
            try:
                table, error = doctor.gpu_table(refresh=refresh), None
            except IketError as failed:  # the checks still go to stdout, the error beside them
                table, error = None, failed
            said = {"checks": checks, "gpu": table, "gpu_error": None if error is None else str(error)}
            sys.stdout.write(json.dumps(said, indent=2) + "\n")
            if error is not None:
                raise error
    else:
        from ..render.text import shown

        for c in results:  # a detail may quote a library's own output: its escapes spelled out
            mark = "ok  " if c.ok else ("FAIL" if c.required else "--  ")
            sys.stdout.write(f"{mark} {shown(c.name)}: {shown(c.detail)}\n")
            if not c.ok and c.fix:
                sys.stdout.write(f"     fix: {shown(c.fix)}\n")
        sys.stdout.flush()
        if gpu:  # after the checks: a machine without a GPU still gets them
            _print_table(doctor.gpu_table(refresh=refresh))
    if not doctor.healthy(results):
        missing = ", ".join(c.name for c in results if c.required and not c.ok)
        raise IketError(f"this machine cannot capture yet: {missing}", hint="see the fixes above")
    return 0


def _print_table(table: dict) -> None:
    from ..render.text import shown

    when = "cached" if table.get("cached") else "probed"
    sys.stdout.write(
        f"\nunder run-iket on this GPU ({when} {shown(table['probed_at'])}; --refresh probes again):\n"
    )
    width = max(len(p["name"]) for p in table["probes"])
    for probe in table["probes"]:
        seconds = f"{probe['seconds']:5.1f} s" if probe["verdict"] != "skipped" else "       "
        name, verdict, detail = (shown(probe[key]) for key in ("name", "verdict", "detail"))
        sys.stdout.write(f"  {name:<{width}}  {verdict:<8} {seconds}  {detail}\n")
