"""The summary of a capture: per process, group and kernel, per range name and per mark name.

Pure functions from a :class:`~iket_cli.model.trace.Trace` to plain data, so that every
renderer (``iket show``'s table, JSON, CSV and markdown, the HTML report, the CI
summary) shows the same numbers.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..model import trace as trace_mod
from ..model.annotations import Roles, roles_for
from ..model.artifacts import untraced as raw_untraced
from ..model.folder import Beside, beside
from ..model.names import Namer, demangle, matches
from ..model.reading import Opened
from ..model.trace import Launch, Trace
from ..model.vocab import GROUPINGS, RANGE_TYPES, ROLES_NAME
from . import launch_parts
from . import launches as launches_mod
from . import lint as lint_mod
from . import spread as spread_mod
from .completeness import shown_too
from .groups import groups, text
from .spread import Spread
from .stats import Stats, stats


@dataclass
class RangeRow:
    name: str
    durations: Stats
    share_of_warp_time: float | None
    spread: Spread | None = None  # a repeated capture: the per-repeat medians (analysis.spread)
    #: ``push/pop`` (range_push/range_pop), ``start/end`` (token ranges), or both, ``+``-joined
    range_type: str = ""


@dataclass
class MarkerRow:
    name: str
    count: int
    offset_from_range: Stats | None  # from the start of the enclosing range


@dataclass
class KernelSummary:
    kernel: str
    launches: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    warp_lifetimes: Stats | None
    ranges: list[RangeRow]
    markers: list[MarkerRow]
    name: str = ""  # the short name shown (model.names), unique within the capture
    demangled: str = ""


def summarize(trace: Trace) -> list[KernelSummary]:
    """One summary per kernel name, launches of the same kernel pooled, in launch order."""
    by_kernel: dict[str, list[Launch]] = defaultdict(list)
    for launch in trace.launches:
        by_kernel[launch.kernel].append(launch)
    return [_kernel(trace, name, launches) for name, launches in by_kernel.items()]


def _kernel(trace: Trace, name: str, launches: list[Launch]) -> KernelSummary:
    import numpy as np

    durations: dict[int, list] = defaultdict(list)
    kinds: dict[int, set[int]] = defaultdict(set)
    offsets: dict[int, list] = defaultdict(list)
    counts: Counter[int] = Counter()
    warp_times = []
    for part in launch_parts.each(launches):  # pooled in launch order: first-seen name order kept
        for into, found in ((durations, part.durations), (offsets, part.offsets)):
            for idx, values in found.items():
                into[idx].extend(values)
        for idx, seen in part.kinds.items():
            kinds[idx] |= seen
        counts.update(part.counts)
        warp_times.append(part.warp_times)
    warp_total = int(sum(int(times.sum()) for times in warp_times))
    ranges = []
    for idx, parts in durations.items():
        values = np.concatenate(parts)
        share = int(values.sum()) / warp_total if warp_total else None
        types = "+".join(RANGE_TYPES.get(k, str(k)) for k in sorted(kinds[idx]))
        ranges.append(RangeRow(trace.name(idx), stats(values), share, range_type=types))
    markers = [
        MarkerRow(trace.name(idx), counts[idx], stats(np.concatenate(offsets[idx]) if idx in offsets else []))
        for idx in counts
    ]
    first = launches[0]
    return KernelSummary(
        name,
        len(launches),
        first.grid,
        first.block,
        stats(np.concatenate(warp_times)),
        sorted(ranges, key=lambda row: -row.durations.total),
        markers,
    )


def to_dict(summary: list[KernelSummary]) -> list[dict]:
    """Plain JSON-ready data, with the resolution flag spelled out."""
    result = []
    for kernel in summary:
        record = asdict(kernel)
        for row, data in zip(kernel.ranges, record["ranges"], strict=True):
            data["at_resolution_limit"] = row.durations.at_resolution_limit
        result.append(record)
    return result


# -- a whole capture, grouped ------------------------------------------------------------


def summarize_capture(
    opened: Opened,
    *,
    by: str = "kernel",
    top: int | None = None,
    roles_file: Path | None = None,
) -> list[dict]:
    """Per process and group: its label, trace path, lint findings and per-kernel summary.

    The capture's filters (:attr:`Opened.filters`) are those of
    :func:`iket_cli.model.trace.select`; ``by`` splits each trace
    into groups (``kernel``: none; ``launch``; ``cta``, ``warp`` or ``sm``; ``role``: the
    warp roles of ``roles_file`` or of the capture's ``kernel_symbols.json``); ``top`` keeps
    the ranges with the largest total time.
    """
    if by not in GROUPINGS:
        raise UsageError(f"unknown --by {by!r}", hint=f"use one of {', '.join(GROUPINGS)}")
    location, filters = opened.location, opened.filters
    roles = roles_for(location, roles_file) if by == "role" else None
    if by == "role" and roles is None:
        raise UsageError(
            f"{location} has no warp roles (no {ROLES_NAME})",
            hint="pass --roles FILE: the kernel_symbols.json CuTe DSL's dump_profiling_metadata wrote",
        )
    loaded = [(found.label, found.path, trace, found.beside) for found, trace in opened.unfiltered()]
    symbols = [launch.kernel for _, _, trace, _ in loaded for launch in trace.launches]
    others = [u["kernel"] for *_, found in loaded for u in _untraced(found)]
    namer = Namer([*symbols, *others])
    record = opened.manifest
    if spread_mod.repeated(record) and by != "launch":  # launch N is a launch of one repeat
        result = _summarize_repeats(loaded, record, by=by, top=top, roles=roles, namer=namer, filters=filters)
    else:
        result = []
        for label, path, trace, found in loaded:
            result += summarize_loaded(
                label, path, trace, by=by, top=top, roles=roles, namer=namer, context=found, **filters
            )
    _range_named(filters.get("range_name"), location, [trace for _, _, trace, _ in loaded])
    given = {name: value for name, value in filters.items() if value is not None}
    if given and not any(p["kernels"] or p["launches"] or p["uninstrumented"] or p["losses"] for p in result):
        shown = " ".join(
            f"{FILTER_FLAGS.get(k, k)} {text(v) if isinstance(v, tuple) else v}" for k, v in given.items()
        )
        names = sorted({namer(symbol) for symbol in symbols})
        raise UsageError(
            f"nothing in {location} matches {shown}",
            hint=f"its kernels: {', '.join(names) or 'none'}",
        )
    return result


def _range_named(name: str | None, location: Path, traces: list[Trace]) -> None:
    """``--range NAME`` that names no range of the capture: a usage error listing its names
    (the marks that stay would otherwise show as a table of a range that is not there)."""
    if name is None:
        return
    names = {trace.name(i) for trace in traces for launch in trace.launches for i in set(launch.ranges.name)}
    if name not in names:
        raise UsageError(
            f"no range named {name!r} in {location}",
            hint=f"its ranges: {', '.join(sorted(names)) or 'none'}",
        )


def _summarize_repeats(loaded, record, *, by, top, roles, namer, filters) -> list[dict]:
    """A repeated capture: each process's counted repeats pooled into one summary, each
    range with its run-to-run spread (per-repeat medians; with ``--by kernel``)."""
    result = []
    for slot in spread_mod.slots(loaded, record):
        trace, spreads = spread_mod.pooled(slot, filters)
        once = {key: value for key, value in filters.items() if key != "launch"}  # applied per repeat
        findings = lint_mod.lint_file(slot.path, slot.traces[0])
        rows = summarize_loaded(
            slot.label, slot.path, trace, by=by, top=top, roles=roles, namer=namer,
            context=slot.context, findings=findings, **once,
        )  # fmt: skip
        for row in rows:
            row["repeats"] = {"pooled": slot.repeats, "excluded": spread_mod.excluded(record)}
            for kernel in row["kernels"] if by == "kernel" else []:
                for line in kernel.ranges:
                    line.spread = spreads.get((kernel.kernel, line.name))
        result += rows
    return result


#: The filters of :func:`iket_cli.model.trace.select` as ``iket show`` spells them.
FILTER_FLAGS = {
    "kernel": "--kernel",
    "range_name": "--range",
    "launch": "--launch",
    "cta": "--cta",
    "warp": "--warp",
    "sm": "--sm",
}


#: Each group of a trace's launches (:func:`.groups.groups`): its name, its launches and
#: their kernels' summaries (:func:`summarize`).
Summed = list[tuple[str, Trace, list[KernelSummary]]]


def summarize_groups(
    loaded: Trace, *, by: str = "kernel", roles: Roles | None = None, **filters: Any
) -> Summed:
    """The costly part of :func:`summarize_loaded`, the trace's alone: its launches chosen by
    ``filters``, grouped ``by``, each group summarized (a process's report works it out
    while the decode's other exports still run)."""
    quiet = launches_mod.quiet_kernels(loaded)
    chosen = trace_mod.select(loaded, **filters)
    return [(group, part, summarize(part)) for group, part in groups(chosen, by, roles, quiet)]


def summarize_loaded(
    label: str,
    path: Path,
    loaded: Trace,
    *,
    by: str = "kernel",
    top: int | None = None,
    findings: list | None = None,
    roles: Roles | None = None,
    namer: Namer | None = None,
    context: Beside | None = None,
    summed: Summed | None = None,
    **filters: Any,
) -> list[dict]:
    """:func:`summarize_capture` of one trace already in memory (loaded once for the
    report, lint and summary); ``findings`` are its lint findings, ``context`` what its
    folder says of it (:func:`~iket_cli.model.folder.beside`), ``summed`` its
    :func:`summarize_groups` for the same ``by``, ``roles`` and filters, where already known.

    Kernels that recorded events get a summary of their ranges and marks (``kernels``);
    those that recorded none (every kernel of a ``--warp-trace`` capture) a row of launch
    statistics (``launches``); those the capture pass saw but could not trace (kernels
    without annotations, from the manifest or the raw capture) a line (``uninstrumented``).
    """
    found = beside(path) if context is None else context
    findings = lint_mod.lint_file(path, loaded) if findings is None else findings
    namer = namer or Namer([launch.kernel for launch in loaded.launches])
    quiet = launches_mod.quiet_kernels(loaded)
    mode = launches_mod.mode_of(loaded, found.mode)
    untraced = _matching(_untraced(found), filters)
    losses = _matching(shown_too(found.losses, loaded), filters)
    result = []
    for group, part, kernels in summed or summarize_groups(loaded, by=by, roles=roles, **filters):
        kernels = [k for k in kernels if k.kernel not in quiet and (k.ranges or k.markers)]
        for kernel in kernels:
            kernel.ranges = kernel.ranges[:top] if top else kernel.ranges
            kernel.name, kernel.demangled = namer(kernel.kernel), demangle(kernel.kernel)
        result.append(
            {
                "process": label,
                "trace": str(path),
                "group": group,
                "mode": mode,
                "kernels": kernels,
                "launches": launches_mod.per_kernel(part, namer, only=quiet) if quiet else [],
                "uninstrumented": [
                    {**u, "short": namer(u["kernel"]) if u["kernel"] in namer else u.get("short")}
                    for u in untraced
                ],
                "findings": findings,
                "losses": losses,
            }
        )
        findings, untraced, losses = [], [], []  # reported once per trace, with its first group
    return result


def _untraced(found: Beside) -> list[dict]:
    """What the capture pass launched but could not trace: as recorded in the manifest, or
    read from the raw capture where there is one and no manifest."""
    if found.process is not None and found.process.get("uninstrumented") is not None:
        return list(found.process["uninstrumented"])
    return raw_untraced(found.raw) if found.raw is not None else []


def _matching(kernels: list[dict], filters: dict[str, Any]) -> list[dict]:
    """Untraced kernels and losses have no location, launch index or range: only --kernel
    selects them (a loss named for no kernel, a CUDA graph's, stays)."""
    if any(filters.get(key) is not None for key in ("range_name", "launch", "cta", "warp", "sm")):
        return []
    pattern = filters.get("kernel")
    return [u for u in kernels if pattern is None or not u["kernel"] or matches(pattern, u["kernel"])]


def to_json(processes: list[dict]) -> dict:
    """``iket show --format json``'s document (``iket report`` embeds the same)."""
    data = [
        {
            **p,
            "kernels": to_dict(p["kernels"]),
            "launches": [row.to_dict() for row in p["launches"]],
            "findings": [f.to_dict() for f in p["findings"]],
        }
        for p in processes
    ]
    return {"processes": data}
