"""A terminal timeline of one launch: a row per warp, ranges as bars, marks as ticks.

The quick look over ssh that the Perfetto UI gives on a desk. Time runs left to right
over the launch's warp lifetimes; each character cell covers ``span / width``
nanoseconds. A cell shows the innermost range covering most of it (colour and initial by
range name), ``│`` where a mark falls, ``·`` where the warp is alive outside any range; in a
launch that recorded no event (a warp trace) ``━`` where the warp is alive.
"""

from __future__ import annotations

from collections import defaultdict
from typing import IO

from ..errors import UsageError
from ..model.names import short
from ..model.trace import Launch, Trace
from ..model.units import duration
from .text import shown

PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")
#: Above this many warps only the first CTA is drawn unless one is chosen with --cta.
MAX_ROWS = 64


def render(
    trace: Trace, out: IO[str], *, launch: int = 0, width: int = 100, max_rows: int = MAX_ROWS
) -> None:
    """Draw launch ``launch`` of ``trace`` (already filtered, e.g. to one CTA) on ``out``."""
    from rich.text import Text

    from .text import markup, rich_console

    if not trace.launches:
        raise UsageError("nothing to draw: no launch matches the filters")
    if not 0 <= launch < len(trace.launches):
        raise UsageError(f"--launch {launch} is out of range: the trace has {len(trace.launches)}")
    item = trace.launches[launch]
    rows = _rows(item)
    if not rows:
        raise UsageError("nothing to draw: this launch has no warp lifetimes or ranges")
    t0 = min(start for spans in rows.values() for start, _ in spans["alive"])
    t1 = max(end for spans in rows.values() for _, end in spans["alive"])
    step = max(1.0, (t1 - t0) / width)
    console = rich_console(file=out, width=width + 40, highlight=False)
    console.print(
        f"{markup(short(item.kernel))} · grid {item.grid} · block {item.block} · {duration(t1 - t0)} "
        f"· one cell = {duration(step)}"
    )
    locs = sorted(rows, key=lambda loc: _order(trace, loc))
    drawn = locs[:max_rows]
    colours: dict[str, str] = {}
    alive = "·" if len(item.ranges) or len(item.markers) else "━"
    for loc in drawn:
        label = Text(_label(trace, loc).ljust(22)[:22] + " ")
        line = _line(rows[loc], t0, step, width, trace, colours, alive)
        console.print(label + line)
    if len(locs) > len(drawn):
        console.print(f"… {len(locs) - len(drawn)} more warps: choose one CTA with --cta X,Y,Z")
    axis = f"{'':23}0{duration(t1 - t0).rjust(width - 1)}"
    console.print(axis)
    if alive != "·":
        console.print(f"{alive} warp alive (this launch recorded no event)")
        return
    legend = Text("ranges: ")
    for name, colour in colours.items():
        legend.append(f"{shown(name)} ", style=f"bold {colour}")
    legend.append(" │ mark  · warp alive")
    console.print(legend)


def _rows(item: Launch) -> dict[int, dict[str, list]]:
    rows: dict[int, dict[str, list]] = defaultdict(lambda: {"alive": [], "ranges": [], "marks": []})
    for loc, start, end in zip(item.warps.loc, item.warps.start, item.warps.end, strict=True):
        rows[loc]["alive"].append((start, end))
    for loc, name, start, end in zip(
        item.ranges.loc, item.ranges.name, item.ranges.start, item.ranges.end, strict=True
    ):
        rows[loc]["ranges"].append((start, end, name))
        if not rows[loc]["alive"]:
            rows[loc]["alive"].append((start, end))
    for loc, ts in zip(item.markers.loc, item.markers.start, strict=True):
        rows[loc]["marks"].append(ts)
    return {loc: spans for loc, spans in rows.items() if spans["alive"]}


def _line(spans: dict, t0: int, step: float, width: int, trace: Trace, colours: dict, alive: str = "·"):
    from rich.text import Text

    cells: list[tuple[str, str | None]] = [(" ", None)] * width
    for start, end in spans["alive"]:
        for col in _columns(start, end, t0, step, width):
            cells[col] = (alive, "dim" if alive == "·" else "cyan")
    # longer (outer) ranges first, so that inner ones are drawn over them
    for start, end, name in sorted(spans["ranges"], key=lambda r: -(r[1] - r[0])):
        label = trace.name(name)
        colour = colours.setdefault(label, PALETTE[len(colours) % len(PALETTE)])
        for col in _columns(start, end, t0, step, width):
            cells[col] = (shown(label)[:1] or "█", f"reverse {colour}")
    for ts in spans["marks"]:
        cells[_column(ts, t0, step, width)] = ("│", "bold white")
    text = Text()
    for char, style in cells:
        text.append(char, style=style)
    return text


def _column(ts: int, t0: int, step: float, width: int) -> int:
    """The cell of a timestamp; one outside the drawn span (a record before its warp started,
    in a damaged trace) is drawn at the edge."""
    return max(0, min(width - 1, int((ts - t0) / step)))


def _columns(start: int, end: int, t0: int, step: float, width: int) -> range:
    first = _column(start, t0, step, width)
    return range(first, max(first, _column(end, t0, step, width)) + 1)


def _order(trace: Trace, loc: int):
    if 0 <= loc < len(trace.locations):
        where = trace.locations[loc]
        return (tuple(where["ctaId"]), where["warpId"])
    return ((1 << 30,), loc)


def _label(trace: Trace, loc: int) -> str:
    if 0 <= loc < len(trace.locations):
        where = trace.locations[loc]
        return f"cta {','.join(map(str, where['ctaId']))} w{where['warpId']} sm{where['smId']}"
    return f"loc {loc}"
