"""``iket show``'s output: a capture's summary as a terminal table, JSON, CSV or markdown.

The numbers come from :mod:`iket_cli.analysis.summary`; this module only lays them out.
rich is imported only when a table is drawn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO

from ..analysis import summary as summary_mod
from ..analysis.lint import Finding
from ..model.names import short
from ..model.units import duration
from ..model.vocab import TIMER_STEP_NS
from . import completeness
from .launch_tables import launch_table, untraced_lines
from .repeats import repeats_line, spread_cells, spread_text
from .text import shown


def flat_rows(processes: list[dict]) -> list[dict]:
    """One row per range, mark, warp-traced kernel and untraced kernel, for CSV and markdown.

    ``kernel`` is the short name a person reads, ``symbol`` the raw one; a ``launch`` row's
    durations are its launch spans (first warp start to last warp end), its count launches.
    """
    rows = []
    for process in processes:
        where = {"process": process["process"], "group": process["group"]}
        for kernel in process["kernels"]:
            base = {**where, "kernel": kernel.name or kernel.kernel, "symbol": kernel.kernel}
            for row in kernel.ranges:
                rows.append(
                    {
                        **base,
                        "kind": "range",
                        "name": row.name,
                        "range_type": row.range_type,
                        **_stat_cells(row.durations),
                        "share_of_warp_time": row.share_of_warp_time,
                        "at_resolution_limit": row.durations.at_resolution_limit,
                        **spread_cells(row.spread),
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
        for launched in process.get("launches", []):
            base = {**where, "kernel": launched.name, "symbol": launched.kernel}
            rows.append(
                {
                    **base,
                    "kind": "launch",
                    "name": "",
                    **_stat_cells(launched.span),
                    "count": launched.launches,
                }
            )
        for untraced in process.get("uninstrumented", []):
            base = {**where, "kernel": untraced["short"], "symbol": untraced["kernel"]}
            rows.append({**base, "kind": "uninstrumented", "name": "", "count": untraced["launches"]})
        rows += completeness.flat_rows(process, where)
    return rows


def _stat_cells(d) -> dict:
    if d is None:
        return {"count": 0}
    return {
        "count": d.count,
        "total_ns": d.total,
        "mean_ns": round(d.mean, 1),
        "min_ns": d.min,
        "p50_ns": d.p50,
        "p90_ns": d.p90,
        "p99_ns": d.p99,
        "max_ns": d.max,
    }


COLUMNS = (
    "process",
    "group",
    "kernel",
    "symbol",
    "kind",
    "name",
    "range_type",
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
    "repeats",
    "repeat_p50_min_ns",
    "repeat_p50_max_ns",
    "repeat_p50_cv",
)


def render_csv(processes: list[dict], out: IO[str]) -> None:
    import csv

    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat_rows(processes))


def render_markdown(processes: list[dict], out: IO[str]) -> None:
    """A table for a CI job page; mark rows give the offset from the enclosing range; a
    repeated capture adds the per-repeat medians' range and CV."""
    rows = flat_rows(processes)
    repeated = any("repeats" in row for row in rows)
    extra = " p50 per repeat | cv |" if repeated else ""
    out.write("| process | kernel | kind | name | count | total | p50 | p90 | p99 | max |" + extra + "\n")
    out.write(
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        + " ---: | ---: |" * repeated
        + "\n"
    )
    for row in rows:
        cells = [
            f"{row['process']}{' ' + row['group'] if row['group'] else ''}",
            markdown_text(row["kernel"]),
            row["kind"],
            markdown_text(row["name"]),
            f"{row['count']:,}",
        ]
        for key in ("total_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"):
            value = row.get(key)
            cells.append("" if value is None else duration(value))
        if repeated and "repeats" in row:
            low, high, cv = row["repeat_p50_min_ns"], row["repeat_p50_max_ns"], row["repeat_p50_cv"]
            cells += [f"{duration(low)} .. {duration(high)}", "-" if cv is None else f"{cv:.1%}"]
        elif repeated:
            cells += ["", ""]
        out.write("| " + " | ".join(cells) + " |\n")


def markdown_text(text: str) -> str:
    """Text for a markdown table cell: ``<cutlass_80_...>`` would be read as an HTML tag; a
    control character is spelled out (:func:`.text.shown`)."""
    return shown(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def render_json(processes: list[dict], out: IO[str]) -> None:
    out.write(json.dumps(summary_mod.to_json(processes), indent=2) + "\n")


def render_table(processes: list[dict], out: IO[str]) -> None:
    from rich.table import Table

    from .text import markup, rich_console

    longest = max((len(k.name) for p in processes for k in p.get("launches", [])), default=0)
    console = rich_console(file=out, width=max(160, longest + 150))  # whole names: never cut
    flagged = marks = False
    for process in processes:
        for line in completeness.banner(process.get("losses", [])):
            console.print(f"[bold red]{markup(line)}[/]" if line == completeness.BANNER else markup(line))
        if process.get("repeats") and (process["kernels"] or process.get("launches")):
            console.print(markup(repeats_line(process)), highlight=False)
        for kernel in process["kernels"]:
            spread = any(row.spread is not None for row in kernel.ranges)
            lifetime = kernel.warp_lifetimes
            group = f" · {markup(process['group'])}" if process["group"] else ""
            title = (
                f"pid {markup(process['process'])}{group} · {markup(kernel.name or kernel.kernel)} · "
                f"{kernel.launches:,} launch(es) · grid {kernel.grid} · block {kernel.block} · "
                f"warp lifetime p50 {duration(lifetime.p50 if lifetime else None)}"
                + completeness.marked(kernel.kernel, process.get("losses", []))
            )
            table = Table()  # its title on a line of its own: a narrow table wraps a title mid-number
            for column in (
                "range",
                "type",
                "count",
                "total (all warps)",
                "mean",
                "min",
                "p50",
                "p90",
                "p99",
                "max",
                "of warp time",
                *(("p50 per repeat", "cv") if spread else ()),
            ):
                table.add_column(column, justify="left" if column in ("range", "type") else "right")
            for row in kernel.ranges:
                d = row.durations
                mark = " *" if d.at_resolution_limit else ""
                flagged |= bool(mark)
                share = "-" if row.share_of_warp_time is None else f"{row.share_of_warp_time:.1%}"
                table.add_row(
                    markup(row.name) + mark,
                    row.range_type,
                    f"{d.count:,}",
                    duration(d.total),
                    duration(d.mean),
                    duration(d.min),
                    duration(d.p50),
                    duration(d.p90),
                    duration(d.p99),
                    duration(d.max),
                    share,
                    *(spread_text(row.spread) if spread else ()),
                )
            for marker in kernel.markers:
                marks = True
                off = marker.offset_from_range
                table.add_row(
                    f"mark {markup(marker.name)}",
                    "",
                    f"{marker.count:,}",
                    "",
                    "",
                    "",
                    f"+{duration(off.p50)}" if off else "-",
                    f"+{duration(off.p90)}" if off else "-",
                    "",
                    "",
                    "",
                    *(("", "") if spread else ()),
                )
            console.print(title, style="italic", highlight=False)
            console.print(table)
        if process.get("launches"):
            console.print(launch_table(process))
        if process.get("losses"):
            console.print(completeness.lost_table(process))
        for line in untraced_lines(process.get("uninstrumented", [])):
            console.print(markup(line), highlight=False)
    if flagged:
        console.print(f"* within one step of the GPU timer ({TIMER_STEP_NS} ns): at the resolution limit")
    if marks:
        console.print("marks: offset from the start of the enclosing range (p50 under p50, p90 under p90)")


def lint_lines(findings: list[Finding]) -> list[str]:
    """Lint findings as warning lines (``iket lint``, and ``iket show`` on stderr)."""
    return [shown(f"iket: warning: [{f.code}] {f.message} ({f.hint})") for f in findings]


#: ``--format`` -> renderer (the choices are ``vocab.SHOW_FORMATS``).
RENDERERS: dict[str, Callable[[list[dict], IO[str]], None]] = {
    "json": render_json,
    "csv": render_csv,
    "markdown": render_markdown,
    "table": render_table,
}


# -- iket show --payload -------------------------------------------------------------------
PAYLOAD_COLUMNS = ("process", "kernel", "kind", "name", "types", "count", "distinct", "values", "min", "max")


def payload_rows(processes: list[dict]) -> list[dict]:
    """One flat row per (process, kernel, kind, name) with payloads."""
    return [
        {"process": p["process"], **row.to_dict(), "kernel": short(row.kernel), "types": "/".join(row.types)}
        for p in processes
        for row in p["payloads"]
    ]


def _values(row: dict) -> str:
    if row["values"] is not None:
        return ", ".join(_number(v) for v in row["values"])
    return f"{_number(row['min'])} .. {_number(row['max'])}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def _payloads_json(processes: list[dict], out: IO[str]) -> None:
    data = [{**p, "payloads": [r.to_dict() for r in p["payloads"]]} for p in processes]
    out.write(json.dumps({"processes": data}, indent=2) + "\n")


def _payloads_csv(processes: list[dict], out: IO[str]) -> None:
    import csv

    writer = csv.DictWriter(out, fieldnames=PAYLOAD_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(
        {k: (v if k != "values" or v is None else ";".join(map(_number, v))) for k, v in r.items()}
        for r in payload_rows(processes)
    )


def _payloads_markdown(processes: list[dict], out: IO[str]) -> None:
    header, cells = _payload_cells(processes)
    out.write("| " + " | ".join(header) + " |\n|" + " --- |" * len(header) + "\n")
    out.writelines("| " + " | ".join(markdown_text(x) for x in c) + " |\n" for c in cells)


def _payloads_table(processes: list[dict], out: IO[str]) -> None:
    from rich.table import Table

    from .text import markup, rich_console

    header, cells = _payload_cells(processes)
    table = Table(title="payloads per event name (ranges: at range_start)", title_justify="left")
    for column in header:
        table.add_column(column, justify="right" if column == "count" else "left")
    for row in cells:
        table.add_row(*(markup(c) for c in row))
    rich_console(file=out, width=160).print(table)


def _payload_cells(processes: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The payload table's header and cells, for the terminal and markdown."""
    rows = payload_rows(processes)
    header = ["process", "kernel", "kind", "name", "type", "count", "values (distinct) or min .. max"]
    cells = [
        [
            r["process"],
            r["kernel"],
            r["kind"],
            r["name"],
            r["types"],
            f"{r['count']:,}",
            f"{_values(r)} ({r['distinct']:,})",
        ]
        for r in rows
    ]
    return header, cells


#: ``--format`` -> writer of ``iket show --payload``'s processes (render/formats.py).
PAYLOAD_WRITERS: dict[str, Callable[[list[dict], IO[str]], None]] = {
    "json": _payloads_json,
    "csv": _payloads_csv,
    "markdown": _payloads_markdown,
    "table": _payloads_table,
}
