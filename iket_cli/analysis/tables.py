"""A capture as eight Arrow tables (``processes``, ``kernels``, ``launches``, ``warps``,
``ranges``, ``markers``, and ``flows`` and ``stages`` from analysis/pipeline_tables.py): what
``iket export`` writes and ``iket sql`` queries.

Built column by column from the numpy trace model (:mod:`iket_cli.model.trace`): no Python
object per event. Names are dictionary-encoded (each trace's string table is the
dictionary), locations are looked up from the location table by index, and each launch's
columns become one Arrow chunk. The schema, with units, is ``docs/schema.md``; pyarrow is
the optional ``sql`` extra (:func:`require`).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ManifestError, ToolchainError
from ..model import labels
from ..model import trace as trace_mod
from ..model.names import Namer, demangle
from ..model.reading import Opened
from ..model.trace import Columns, Launch, Trace
from ..model.vocab import PAYLOAD_TYPES, PUSH_POP, TABLE_NAMES, pid_of
from . import enclosing
from .stats import ints

#: What each table reads of a trace (launches count ranges and markers; a marker's range).
_READS = {
    "processes": (),
    "kernels": trace_mod.KINDS,
    "launches": trace_mod.KINDS,
    "warps": ("warps",),
    "ranges": ("ranges",),
    "markers": ("markers", "ranges"),
    "flows": ("ranges",),
    "stages": ("ranges", "warps"),
}
#: A location's fields, as the tables name them (``ctaId`` becomes cta_x, cta_y, cta_z).
_PLACE = (("sm", "smId"), ("tpc", "tpcId"), ("gpc", "gpcId"), ("warp", "warpId"))


def require(what: str = "iket export and iket sql"):
    """pyarrow, or a one-line error naming the extra that brings it (exit 2)."""
    try:
        import pyarrow
    except ImportError:
        raise ToolchainError(
            f"{what} need pyarrow, which is not installed",
            hint="pip install 'iket-cli[sql]' (pyarrow and duckdb)",
        ) from None
    return pyarrow


def build(opened: Opened, capture: str = "", only: tuple[str, ...] = TABLE_NAMES) -> dict[str, Any]:
    """The tables of an opened capture, named as in TABLE_NAMES (those in ``only``);
    ``capture`` fills each table's ``capture`` column (``iket sql base=A new=B``)."""
    pa = require()
    parts: dict[str, list] = defaultdict(list)
    for name, chunk in chunks(opened, capture, only):
        parts[name].append(chunk)
    return {
        name: pa.concat_tables(parts[name]) if parts[name] else _empty(pa)
        for name in TABLE_NAMES
        if name in only
    }


def chunks(
    opened: Opened, capture: str = "", only: tuple[str, ...] = TABLE_NAMES
) -> Iterator[tuple[str, Any]]:
    """``(table, rows)``: the tables in ``only`` a piece at a time (a process, a launch), so
    that a writer holds one piece, not the whole capture; ``kernels`` comes last."""
    pa = require()
    kinds = tuple(sorted({kind for name in only for kind in _READS[name]}))
    found = [(seen.label, seen.path, trace, seen.beside) for seen, trace in opened.unfiltered(kinds)]
    namer = Namer(launch.kernel for _, _, trace, _ in found for launch in trace.launches)
    launches: list[dict[str, Any]] = []  # one row each: a table of their own at the end
    shaped: set[str] = set()  # tables with a piece already: an empty piece adds nothing more
    next_id = 0
    for label, path, trace, context in found:
        process = context.process or {"pid_hex": pid_of(path.name)}
        if "processes" in only:
            yield "processes", _process(pa, capture, label, path, process)
        firsts = []
        for number, launch in enumerate(trace.launches):
            firsts.append(next_id)
            where = {"capture": capture, "process": label, "launch": number}
            if "launches" in only or "kernels" in only:
                launches.append(_launch(where, launch, namer))
            for name, build in _PER_LAUNCH.items():
                if name in only and (len(getattr(launch, name)) or name not in shaped):
                    shaped.add(name)
                    yield name, build(pa, where, trace, launch, next_id)
            next_id += len(launch.ranges)
        yield from _pipeline_tables(pa, {"capture": capture, "process": label}, trace, path, firsts, only)
    table = _launches(pa, launches)
    if "launches" in only and launches:
        yield "launches", table
    if "kernels" in only:
        yield "kernels", _kernels(pa, table)


def _pipeline_tables(pa, where, trace: Trace, path: Path, firsts: list[int], only: tuple[str, ...]):
    """``flows`` and ``stages`` of one trace (analysis/pipeline_tables.py), where asked for."""
    from . import pipeline_tables

    if "flows" in only:
        yield "flows", pipeline_tables.flows_table(pa, where, trace, path, firsts)
    if "stages" in only:
        yield "stages", pipeline_tables.stages_table(pa, where, trace, path)


def empty():
    """A table without rows (a kind of record the capture has none of)."""
    return _empty(require())


def _empty(pa):
    return pa.table({"capture": pa.array([], pa.string())})


def _kernels(pa, launches):
    """One row per (capture, process, kernel): its launches and what they recorded."""
    rows: dict[tuple, dict[str, Any]] = {}
    if "kernel" not in launches.column_names:
        return _empty(pa)
    wanted = ["capture", "process", "kernel", "name", "demangled", "ranges", "markers"]
    for launch in launches.select(wanted).to_pylist():
        key = (launch["capture"], launch["process"], launch["kernel"])
        row = rows.setdefault(key, {**launch, "launches": 0, "ranges": 0, "markers": 0})
        row["launches"] += 1
        row["ranges"] += launch["ranges"]
        row["markers"] += launch["markers"]
    return pa.Table.from_pylist(list(rows.values()))


def named(value: str, n: int):
    """A ``capture`` column of n rows saying ``value``."""
    return _constant(require(), value, n)


def _constant(pa, value, n: int):
    """One value n times, as a dictionary column (nothing per row but an index)."""
    import numpy as np

    if value is None:
        return pa.nulls(n, pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), _dictionary(pa, (value,)))


@functools.lru_cache(maxsize=256)
def _dictionary(pa, values: tuple[str, ...]):
    """An Arrow array of a few strings, made once: pyarrow's conversion of Python values looks
    for optional modules (dateutil) on every call, which was most of a small launch's cost."""
    return pa.array(values, pa.string())


def _process(pa, capture: str, label: str, path: Path, process: dict[str, Any]):
    tags = process.get("labels") or {}
    return pa.table(
        {
            "capture": [capture],
            "process": [label],
            "pid": pa.array([process.get("pid")], pa.int64()),
            "pid_hex": [process.get("pid_hex")],
            "host": pa.array([tags.get("hostname")], pa.string()),
            "rank": pa.array([tags.get("rank")], pa.int32()),
            "repeat": pa.array([process.get("repeat")], pa.int32()),
            "source": pa.array([process.get("folder")], pa.string()),
            "described": [labels.describe(process) if process.get("pid_hex") else label],
            "trace": [str(path)],
        }
    )


def _head(pa, where: dict[str, Any], n: int) -> dict[str, Any]:
    """The columns every per-launch table starts with."""
    import numpy as np

    return {
        "capture": _constant(pa, where["capture"], n),
        "process": _constant(pa, where["process"], n),
        "launch": pa.array(np.full(n, where["launch"], np.int32)),
    }


def _launch(where: dict[str, Any], launch: Launch, namer: Namer) -> dict[str, Any]:
    """One launch's row of the ``launches`` table."""
    w = launch.warps
    starts, ends = ints(w.start), ints(w.end)
    first = int(starts.min()) if len(starts) else None
    last = int(ends.max()) if len(ends) else None
    cluster = launch.cluster or (None, None, None)
    row = {
        **where,
        "kernel": launch.kernel,
        "name": namer(launch.kernel),
        "demangled": demangle(launch.kernel),
        "grid_id": launch.grid_id,
    }
    for what, dims in (("grid", launch.grid), ("block", launch.block), ("cluster", cluster)):
        for n, axis in enumerate("xyz"):
            row[f"{what}_{axis}"] = dims[n]
    row.update(span_start=first, span_end=last, span_ns=None if first is None else last - first)
    row.update(warps=len(w), ranges=len(launch.ranges), markers=len(launch.markers))
    return row


def _launches(pa, rows: list[dict[str, Any]]):
    """The ``launches`` table: its rows made once, typed as docs/schema.md says."""
    if not rows:
        return _empty(pa)
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    types = {"launch": pa.int32(), "grid_id": pa.int64()}
    types.update({f"{what}_{axis}": pa.int32() for what in ("grid", "block", "cluster") for axis in "xyz"})
    counts = ("span_start", "span_end", "span_ns", "warps", "ranges", "markers")
    types.update({key: pa.int64() for key in counts})
    table = {}
    for key, values in columns.items():
        try:  # a damaged trace's value beyond its column's type (2**80): said, not a traceback
            table[key] = pa.array(
                values, pa.string() if key in ("capture", "process") else types.get(key, pa.string())
            )
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
            raise ManifestError(
                f"a launch's {key} is out of range", hint="decode it again: iket postprocess DIR"
            ) from None
        table[key] = table[key].dictionary_encode() if key in ("capture", "process") else table[key]
    return pa.table(table)


def _places(pa, trace: Trace, loc) -> dict[str, Any]:
    """sm, tpc, gpc, cta_x/y/z and warp of each record, from its location index."""
    import numpy as np

    known = (loc >= 0) & (loc < len(trace.locations))
    safe = np.where(known, loc, 0)
    mask = ~known
    out = {column: pa.array(_table(trace, key)[safe], pa.int32(), mask=mask) for column, key in _PLACE}
    cta = _table(trace, "ctaId")
    for n, axis in enumerate("xyz"):
        out[f"cta_{axis}"] = pa.array(cta[safe, n], pa.int32(), mask=mask)
    return out


def _table(trace: Trace, key: str):
    """One field of every location, as a numpy array indexed like the location table."""
    import numpy as np

    cache = trace.__dict__.setdefault("_columns", {})
    if key not in cache:
        values = [where.get(key) for where in trace.locations] or [0]
        if key == "ctaId":
            cache[key] = np.array([v if isinstance(v, list) and len(v) == 3 else [0, 0, 0] for v in values])
        else:
            cache[key] = np.array([v if isinstance(v, int) else -1 for v in values], np.int64)
    return cache[key]


def _warps(pa, where: dict[str, Any], trace: Trace, launch: Launch, first_id: int):
    w = launch.warps
    start, end = ints(w.start), ints(w.end)
    return pa.table(
        {
            **_head(pa, where, len(w)),
            **_places(pa, trace, ints(w.loc)),
            "start_ts": pa.array(start),
            "end_ts": pa.array(end),
            "duration_ns": pa.array(end - start),
        }
    )


def _names(pa, trace: Trace, indices):
    """Name indices as a dictionary column over the trace's string table (null where an
    index is outside it: a mark outside every range has no range name)."""
    import numpy as np

    valid = (indices >= 0) & (indices < len(trace.strings))
    codes = pa.array(np.where(valid, indices, 0).astype(np.int32), mask=~valid)
    cache = trace.__dict__.setdefault("_columns", {})
    if "strings" not in cache:  # the string table, converted once per trace, not per launch
        cache["strings"] = pa.array(trace.strings or [""], pa.string())
    return pa.DictionaryArray.from_arrays(codes, cache["strings"])


def _ranges(pa, where: dict[str, Any], trace: Trace, launch: Launch, first_id: int):
    import numpy as np

    r = launch.ranges
    n = len(r)
    start, end, loc = ints(r.start), ints(r.end), ints(r.loc)
    kind = ints(r.kind) if len(r.kind) == n else np.full(n, PUSH_POP, np.int64)
    stack = kind == PUSH_POP
    columns = {
        "id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64)),
        **_head(pa, where, n),
        "name": _names(pa, trace, ints(r.name)),
        "kind": pa.DictionaryArray.from_arrays(
            pa.array(stack.astype(np.int8)), _dictionary(pa, ("start_end", "push_pop"))
        ),
        **_places(pa, trace, loc),
        "start_ts": pa.array(start),
        "end_ts": pa.array(end),
        "duration_ns": pa.array(end - start),
        "depth": pa.array(depths(loc, start, end, stack), pa.int32(), mask=~stack),
    }
    columns.update(_payloads(pa, r, n, ("payload_type", "payload"), end_too=True))
    return pa.table(columns)


def _payloads(pa, columns: Columns, n: int, names: tuple[str, str], end_too: bool = False) -> dict:
    """The payload type (its name, see PAYLOAD_TYPES) and value; null where none was given."""
    import numpy as np

    pairs = [("", columns.ptype, columns.pval)]
    if end_too:
        pairs.append(("_end", columns.ptype_end, columns.pval_end))
    out = {}
    for suffix, types, values in pairs:
        if len(types) == n:
            codes = np.asarray(types, np.int64)
            known = range(max(int(codes.max(initial=0)), 0) + 1)
            text = np.array([PAYLOAD_TYPES.get(c) or "" for c in known])
            out[names[0] + suffix] = pa.array(text[codes], mask=codes == 0).dictionary_encode()
            out[names[1] + suffix] = pa.array(np.asarray(values, np.float64), mask=codes == 0)
        else:
            out[names[0] + suffix] = pa.nulls(n, pa.string()).dictionary_encode()
            out[names[1] + suffix] = pa.nulls(n, pa.float64())
    return out


def _markers(pa, where: dict[str, Any], trace: Trace, launch: Launch, first_id: int):
    import numpy as np

    m = launch.markers
    n = len(m)
    ts = ints(m.start)
    marks, held = enclosing.innermost(launch)
    holder = np.full(n, -1, np.int64)
    holder[marks] = held
    none = holder < 0
    safe = np.where(none, 0, holder)
    r_start = ints(launch.ranges.start)
    offset = ts - (r_start[safe] if len(r_start) else 0)
    r_names = ints(launch.ranges.name)
    return pa.table(
        {
            **_head(pa, where, n),
            "name": _names(pa, trace, ints(m.name)),
            **_places(pa, trace, ints(m.loc)),
            "ts": pa.array(ts),
            **_payloads(pa, m, n, ("payload_type", "payload")),
            "range_id": pa.array(holder + first_id, pa.int64(), mask=none),
            "range_name": _names(pa, trace, np.where(none, -1, r_names[safe] if len(r_names) else -1)),
            "offset_ns": pa.array(offset, pa.int64(), mask=none),
        }
    )


#: The tables built a launch at a time, by the launch's records of the same name.
_PER_LAUNCH = {"warps": _warps, "ranges": _ranges, "markers": _markers}


def depths(loc, start, end, stack):
    """Each push/pop range's depth in its warp: how many of the warp's push/pop ranges are
    open when it starts (0: outermost); 0 for token ranges (masked by the caller).

    One sort of the opens and closes of all warps. At one instant the closes of ranges that
    began earlier come first (back-to-back ranges are siblings), then the opens in the
    trace's order, which is the order of the pushes (a parent before its child, an earlier
    sibling before a later one), a zero-length range closing right after its own open. The
    running sum of +1 per open and -1 per close before a range's open is its depth (each
    warp's sum returns to zero, so the warps before it add nothing).
    """
    import numpy as np

    n = len(start)
    depth = np.zeros(n, np.int64)
    rows = np.flatnonzero(stack)
    if not len(rows):
        return depth
    s, e, w = start[rows], end[rows], loc[rows]
    count = len(rows)
    index = np.arange(count)
    times = np.concatenate([s, e])
    warps = np.concatenate([w, w])
    priority = np.concatenate([np.ones(count, np.int64), np.where(e > s, 0, 1)])
    order_in_trace = np.concatenate([index, index])
    close = np.concatenate([np.zeros(count, np.int64), np.ones(count, np.int64)])
    order = np.lexsort((close, order_in_trace, priority, times, warps))
    step = 1 - 2 * close
    running = np.cumsum(step[order]) - step[order]  # the sum before each event
    at = np.empty(2 * count, np.int64)
    at[order] = running
    depth[rows] = at[:count]
    return depth
