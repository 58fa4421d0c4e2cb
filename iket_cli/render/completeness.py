"""What a capture lost, said beside its numbers: ``iket show``'s banner and its table of
lost launches (a kernel that lost every record keeps its row here), their CSV rows, and the
HTML report's health panel reads the same record (:mod:`iket_cli.model.completeness`)."""

from __future__ import annotations

from typing import Any

#: The banner's first line, above a capture's tables.
BANNER = "INCOMPLETE: these numbers miss what IKET lost (iket lint lists each loss)"


def banner(losses: list[dict[str, Any]]) -> list[str]:
    """The banner: its first line, then one line per loss with its fix."""
    if not losses:
        return []
    lines = [BANNER]
    for loss in losses:
        lines.append(f"  {loss['message']}; {loss['fix']}" if loss["fix"] else f"  {loss['message']}")
    return lines


def lost_table(process: dict[str, Any]):
    """One row per loss of a process: the kernel (its short name), launches, what was lost,
    the cause and the fix."""
    from rich.table import Table

    from .text import markup

    group = f" · {markup(process['group'])}" if process["group"] else ""
    table = Table(title=f"pid {markup(process['process'])}{group} · INCOMPLETE: lost", title_justify="left")
    for column in ("kernel", "launches", "lost", "cause", "fix"):
        table.add_column(column, justify="right" if column == "launches" else "left")
    for loss in process["losses"]:
        table.add_row(
            markup(loss.get("short") or loss["kernel"] or "(not named)"),
            f"{loss['launches']:,}",
            markup(loss["lost"]) if loss.get("records") is None else f"{loss['records']:,} warp records",
            markup(loss["cause"]),
            markup(loss["fix"]),
        )
    return table


def flat_rows(process: dict[str, Any], where: dict[str, Any]) -> list[dict[str, Any]]:
    """CSV and markdown: one ``lost`` row per loss (``name`` the cause, ``count`` launches)."""
    return [
        {
            **where,
            "kernel": loss.get("short") or loss["kernel"],
            "symbol": loss["kernel"],
            "kind": "lost",
            "name": loss["cause"],
            "count": loss["launches"],
        }
        for loss in process.get("losses", [])
    ]


def marked(kernel: str, losses: list[dict[str, Any]]) -> str:
    """`` · INCOMPLETE`` for a kernel table's title when the kernel lost something."""
    return " · [bold red]INCOMPLETE[/]" if any(loss["kernel"] == kernel for loss in losses) else ""
