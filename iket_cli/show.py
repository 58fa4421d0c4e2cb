"""``iket show``'s logic: find the traces of a capture, summarise them, render them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from . import labels
from . import lint as lint_mod
from . import manifest as manifest_mod
from . import summary as summary_mod
from . import trace as trace_mod
from .errors import ManifestError, UsageError
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
            (process_label(p), folder / p["artifacts"]["trace_json"]["path"])
            for p in manifest_mod.instrumented(record["processes"])
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


def process_label(process: dict) -> str:
    """``rank 1 (pid 0x2b5)``; in a merged capture prefixed by its input: ``node-a/0x204``."""
    label = labels.describe(process).removeprefix("pid ")
    return f"{process['folder']}/{label}" if process.get("folder") else label


GROUPINGS = ("kernel", "launch", "cta", "warp", "sm")
_LOCATION_KEY = {"cta": "ctaId", "warp": "warpId", "sm": "smId"}


def summarize(location: Path, *, by: str = "kernel", top: int | None = None, **filters) -> list[dict]:
    """Per process and group: its label, trace path and the per-kernel summary.

    ``filters`` are those of :func:`iket_cli.trace.select`; ``by`` splits each trace into
    groups (``kernel``: none; ``launch``; ``cta``, ``warp`` or ``sm``); ``top`` keeps the
    ranges with the largest total time.
    """
    if by not in GROUPINGS:
        raise UsageError(f"unknown --by {by!r}", hint=f"use one of {', '.join(GROUPINGS)}")
    result = []
    for label, path in find_traces(location):
        result += summarize_loaded(label, path, trace_mod.load(path), by=by, top=top, **filters)
    return result


def summarize_loaded(
    label: str, path: Path, loaded: trace_mod.Trace, *, by: str = "kernel", top: int | None = None, **filters
) -> list[dict]:
    """:func:`summarize` of one trace already in memory (``iket report`` loads it once)."""
    result = []
    findings = lint_mod.lint(loaded)
    chosen = trace_mod.select(loaded, **filters)
    for group, part in _groups(chosen, by):
        kernels = [k for k in summary_mod.summarize(part) if k.ranges or k.markers]
        for kernel in kernels:
            kernel.ranges = kernel.ranges[:top] if top else kernel.ranges
        result.append(
            {"process": label, "trace": str(path), "group": group, "kernels": kernels, "findings": findings}
        )
        findings = []  # reported once per trace, with its first group
    return result


def _groups(trace: trace_mod.Trace, by: str) -> list[tuple[str, trace_mod.Trace]]:
    if by == "kernel":
        return [("", trace)]
    if by == "launch":
        return [
            (f"launch {n}", trace_mod.Trace(trace.path, [launch], trace.strings, trace.locations))
            for n, launch in enumerate(trace.launches)
        ]
    key = _LOCATION_KEY[by]
    used = {i for launch in trace.launches for i in launch.ranges.loc if 0 <= i < len(trace.locations)}
    values = sorted({_hashable(trace.locations[i][key]) for i in used})
    return [(f"{by} {_text(value)}", trace_mod.select(trace, **{by: value})) for value in values]


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def _text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def flat_rows(processes: list[dict]) -> list[dict]:
    """One row per range and per mark, for CSV and markdown."""
    rows = []
    for process in processes:
        for kernel in process["kernels"]:
            base = {"process": process["process"], "group": process["group"], "kernel": kernel.kernel}
            for row in kernel.ranges:
                d = row.durations
                rows.append(
                    {
                        **base,
                        "kind": "range",
                        "name": row.name,
                        "count": d.count,
                        "total_ns": d.total,
                        "mean_ns": round(d.mean, 1),
                        "min_ns": d.min,
                        "p50_ns": d.p50,
                        "p90_ns": d.p90,
                        "p99_ns": d.p99,
                        "max_ns": d.max,
                        "share_of_warp_time": row.share_of_warp_time,
                        "at_resolution_limit": d.at_resolution_limit,
                    }
                )
            for marker in kernel.markers:
                off = marker.offset_from_range
                rows.append(
                    {
                        **base,
                        "kind": "mark",
                        "name": marker.name,
                        "count": marker.count,
                        "p50_ns": off.p50 if off else None,
                        "p90_ns": off.p90 if off else None,
                    }
                )
    return rows


COLUMNS = (
    "process",
    "group",
    "kernel",
    "kind",
    "name",
    "count",
    "total_ns",
    "mean_ns",
    "min_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "max_ns",
    "share_of_warp_time",
    "at_resolution_limit",
)


def render_csv(processes: list[dict], out: IO[str]) -> None:
    import csv

    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat_rows(processes))


def render_markdown(processes: list[dict], out: IO[str]) -> None:
    """A table for a CI job page; mark rows give the offset from the enclosing range."""
    out.write("| process | kernel | kind | name | count | total | p50 | p90 | p99 | max |\n")
    out.write("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    for row in flat_rows(processes):
        cells = [
            f"{row['process']}{' ' + row['group'] if row['group'] else ''}",
            row["kernel"],
            row["kind"],
            row["name"],
            f"{row['count']:,}",
        ]
        for key in ("total_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"):
            value = row.get(key)
            cells.append("" if value is None else duration(value))
        out.write("| " + " | ".join(cells) + " |\n")


def to_json(processes: list[dict]) -> dict:
    """``iket show --format json``'s document (``iket report`` embeds the same)."""
    data = [
        {**p, "kernels": summary_mod.to_dict(p["kernels"]), "findings": [f.to_dict() for f in p["findings"]]}
        for p in processes
    ]
    return {"processes": data}


def render_json(processes: list[dict], out: IO[str]) -> None:
    out.write(json.dumps(to_json(processes), indent=2) + "\n")


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
            group = f" · {escape(process['group'])}" if process["group"] else ""
            title = (
                f"pid {escape(process['process'])}{group} · {escape(kernel.kernel)} · "
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
