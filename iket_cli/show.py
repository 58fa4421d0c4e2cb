"""``iket show``'s logic: find the traces of a capture, summarise them, render them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from . import manifest as manifest_mod
from . import summary as summary_mod
from . import trace as trace_mod
from .errors import ManifestError
from .outdir import MANIFEST_NAME


def find_traces(location: Path) -> list[tuple[str, Path]]:
    """``(label, trace.json)`` for a capture directory, a manifest or one trace file."""
    location = Path(location)
    if location.is_file() and location.name != MANIFEST_NAME:
        return [(location.name.split(".")[0].removeprefix("iket_pid_"), location)]
    folder = location if location.is_dir() else location.parent
    if (folder / MANIFEST_NAME).is_file():
        record = manifest_mod.read(folder)
        found = [
            (p["pid_hex"], folder / p["artifacts"]["trace_json"]["path"])
            for p in record["processes"]
            if "trace_json" in p["artifacts"]
        ]
    elif location.is_dir():
        found = [
            (p.name.split(".")[0].removeprefix("iket_pid_"), p)
            for p in sorted(folder.glob("iket_pid_*.trace.json"))
        ]
    else:
        raise ManifestError(f"{location} does not exist", hint="give a capture directory or a trace")
    if not found:
        raise ManifestError(
            f"{location} holds no JSON trace",
            hint="capture with --postprocess all or json, or run: iket postprocess DIR --format json",
        )
    return found


def summarize(location: Path) -> list[dict]:
    """Per process: its label, trace path and the per-kernel summary."""
    return [
        {"process": label, "trace": str(path), "kernels": summary_mod.summarize(trace_mod.load(path))}
        for label, path in find_traces(location)
    ]


def render_json(processes: list[dict], out: IO[str]) -> None:
    data = [{**p, "kernels": summary_mod.to_dict(p["kernels"])} for p in processes]
    out.write(json.dumps({"processes": data}, indent=2) + "\n")


def duration(ns: float | None) -> str:
    """A duration in the unit that reads best: 224 ns, 3.52 µs, 1.20 ms, 2.00 s."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def render_table(processes: list[dict], out: IO[str]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=out, width=160)
    flagged = False
    for process in processes:
        for kernel in process["kernels"]:
            lifetime = kernel.warp_lifetimes
            title = (
                f"pid {escape(process['process'])} · {escape(kernel.kernel)} · "
                f"{kernel.launches} launch(es) · grid {kernel.grid} · block {kernel.block} · "
                f"warp lifetime p50 {duration(lifetime.p50 if lifetime else None)}"
            )
            table = Table(title=title, title_justify="left")
            for column in (
                "range",
                "count",
                "total",
                "mean",
                "min",
                "p50",
                "p90",
                "p99",
                "max",
                "of warp time",
            ):
                table.add_column(column, justify="left" if column == "range" else "right")
            for row in kernel.ranges:
                d = row.durations
                mark = " *" if d.at_resolution_limit else ""
                flagged |= bool(mark)
                share = "-" if row.share_of_warp_time is None else f"{row.share_of_warp_time:.1%}"
                table.add_row(
                    escape(row.name) + mark,
                    f"{d.count:,}",
                    duration(d.total),
                    duration(d.mean),
                    duration(d.min),
                    duration(d.p50),
                    duration(d.p90),
                    duration(d.p99),
                    duration(d.max),
                    share,
                )
            for marker in kernel.markers:
                off = marker.offset_from_range
                table.add_row(
                    f"mark {escape(marker.name)}",
                    f"{marker.count:,}",
                    "",
                    "",
                    "",
                    f"+{duration(off.p50)}" if off else "-",
                    f"+{duration(off.p90)}" if off else "-",
                    "",
                    "",
                    "",
                )
            console.print(table)
    if flagged:
        console.print(
            f"* within one step of the GPU timer ({summary_mod.TIMER_STEP_NS} ns): at the resolution limit"
        )
    console.print("marks: offset from the start of the enclosing range (p50 under p50, p90 under p90)")
