"""A repeated capture's run-to-run spread as ``iket show`` prints it (table, CSV, markdown)."""

from __future__ import annotations

from ..model.units import duration


def spread_cells(spread) -> dict:
    """A repeated capture's run-to-run columns: the per-repeat medians' range and CV."""
    if spread is None:
        return {}
    return {
        "repeats": len(spread.medians),
        "repeat_p50_min_ns": spread.min,
        "repeat_p50_max_ns": spread.max,
        "repeat_p50_cv": spread.cv,
    }


def spread_text(spread) -> tuple[str, str]:
    """(``192 ns .. 224 ns``, ``4.1%``): the per-repeat medians' range and their CV."""
    if spread is None:
        return "-", "-"
    cv = "-" if spread.cv is None else f"{spread.cv:.1%}"
    return f"{duration(spread.min)} .. {duration(spread.max)}", cv


def repeats_line(process: dict) -> str:
    """``pid 0x204: 5 repeats pooled (1, 2, 3, 4, 5); left out: repeat 6 (drifted: ...)``."""
    info = process["repeats"]
    pooled = ", ".join(map(str, info["pooled"]))
    line = f"pid {process['process']}: {len(info['pooled'])} repeats pooled ({pooled})"
    return line + (f"; left out: {'; '.join(info['excluded'])}" if info["excluded"] else "")
