"""The tables of kernels without ranges: those that recorded no event (every kernel of a
``--warp-trace`` capture), with their launch spans, and those the capture pass launched but
could not trace (no annotations)."""

from __future__ import annotations

from ..model.units import duration
from ..model.vocab import WARP_TRACE


def dims(value) -> str:
    """``4096×1×1``: a grid or block as people write it."""
    return "×".join(str(v) for v in value)


def launch_table(process: dict):
    """The kernels that recorded no event (all of a ``--warp-trace`` capture): per kernel its
    launches and their span (first warp start to last warp end), warps, SMs and gaps."""
    from rich.table import Table

    from .text import markup

    group = f" · {markup(process['group'])}" if process["group"] else ""
    what = "warp trace" if process.get("mode") == WARP_TRACE else "kernels that recorded no event"
    count = sum(k.launches for k in process["launches"])
    table = Table(
        title=f"pid {markup(process['process'])}{group} · {what} · {count:,} launch(es) of "
        f"{len(process['launches'])} kernel(s) · span: first warp start to last warp end",
        title_justify="left",
    )
    for column in LAUNCH_COLUMNS:
        table.add_column(column, justify="left" if column == "kernel" else "right", no_wrap=True)
    for k in process["launches"]:
        span, warp, gap = k.span, k.warp_lifetimes, k.gap_before
        table.add_row(
            markup(k.name),
            f"{k.launches:,}",
            dims(k.grid),
            dims(k.block),
            duration(span.p50 if span else None),
            duration(span.p90 if span else None),
            duration(span.max if span else None),
            duration(span.total if span else None),
            duration(warp.p50 if warp else None),
            duration(warp.max if warp else None),
            str(k.sms),
            duration(gap.p50 if gap else None),
        )
    return table


LAUNCH_COLUMNS = (
    "kernel",
    "launches",
    "grid",
    "block",
    "span p50",
    "p90",
    "max",
    "total",
    "warp p50",
    "warp max",
    "SMs",
    "gap before p50",
)


def untraced_lines(untraced: list[dict]) -> list[str]:
    """A line per kernel the capture pass launched but could not trace (no annotations)."""
    if not untraced:
        return []
    total = sum(u["launches"] for u in untraced)
    lines = [f"not instrumented (launched, not traced): {total:,} launch(es) of {len(untraced)} kernel(s)"]
    width = max(len(u["short"]) for u in untraced)
    lines += [
        f"  {u['short']:<{width}}  ×{u['launches']:<4} grid {dims(u['grid'])} · block {dims(u['block'])}"
        for u in untraced
    ]
    return lines
