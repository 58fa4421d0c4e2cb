"""A launch's columns scanned by the worker that exported it, and a process's trace
assembled from them.

With ``html`` among the formats, the report, lint and summary read each process's JSON
trace after it is written. For a JSON export split by launches (:mod:`.join`), each
part's worker scans its own part into the columnar model (:func:`iket_cli.model.trace.load`
of a one-launch file) while the other launches still decode, and keeps the columns beside
its spool (:func:`keep`); once the parts are merged, the whole trace is assembled from them
(:func:`assemble`: the name and location columns looked up in the merged tables, as the
merge rewrote them in the file) and returned in the decode's outcome
(:class:`iket_cli.decode.tasks.Outcome`) for the lint and the report, which then never read
the merged file.
"""

from __future__ import annotations

from array import array
from dataclasses import fields
from pathlib import Path

from ....model import trace as trace_mod
from .. import sidecar
from . import indices

_KINDS = ("ranges", "markers", "warps")


def wanted(formats: tuple[str, ...]) -> bool:
    """Whether a JSON export for these formats is read back by the report (and lint)."""
    return "html" in formats


def keep(spooled: Path, path: Path) -> None:
    """Scan the one-launch export ``spooled`` and keep its columns in ``path``."""
    loaded = trace_mod.load(spooled)
    (launch,) = loaded.launches
    keep_launch(launch, path)


def keep_launch(launch: trace_mod.Launch, path: Path) -> None:
    """Keep one launch's columns in ``path`` (:mod:`.sidecar`)."""
    import numpy as np

    head = {
        "kernel": launch.kernel,
        "grid": launch.grid,
        "block": launch.block,
        "grid_id": launch.grid_id,
        "cluster": launch.cluster,
    }
    arrays = {}
    for kind in _KINDS:
        for column in fields(trace_mod.Columns):
            values = getattr(getattr(launch, kind), column.name)
            arrays[f"{kind}.{column.name}"] = np.asarray(values)
    sidecar.save(path, arrays, head)


def read(path: Path) -> trace_mod.Launch:
    """The launch :func:`keep` kept, its indices still those of its own part's tables."""
    kept, head = sidecar.load(path)
    launch = trace_mod.Launch(
        head["kernel"],
        tuple(head["grid"]),
        tuple(head["block"]),
        head["grid_id"],
        cluster=tuple(head["cluster"]) if head["cluster"] else None,
    )
    for kind in _KINDS:
        columns = getattr(launch, kind)
        for column in fields(trace_mod.Columns):
            empty = getattr(columns, column.name)
            setattr(columns, column.name, array(empty.typecode, kept[f"{kind}.{column.name}"].tobytes()))
    return launch


def join(kept: list[Path], maps: list, ctas: int, path: Path) -> None:
    """Keep in ``path`` the columns of a launch stitched from its CTA chunks (:mod:`.chunks`),
    from the columns each chunk's worker kept (``kept``, in CTA order) and each chunk's
    (names, locations) map into the launch's tables: every record renumbered, and put where
    the stitch put it (grouped by warp, in the launch's location order; a warp's records in
    its chunk's order)."""
    import numpy as np

    launches = [read(one) for one in kept]
    launch = launches[0]
    launch.grid = (ctas, *launch.grid[1:])
    for kind in _KINDS:
        parts = [getattr(one, kind) for one in launches]
        rows = [len(part) for part in parts]  # before the first chunk's columns are replaced
        locs = [_mapped(part.loc, lookup) for part, (_, lookup) in zip(parts, maps, strict=True)]
        order = np.argsort(np.concatenate(locs), kind="stable") if locs else None
        joined = getattr(launch, kind)
        for column in fields(trace_mod.Columns):
            pieces = [np.asarray(getattr(part, column.name)) for part in parts]
            if column.name == "loc":
                pieces = locs
            elif column.name == "name":
                pieces = [_mapped(part.name, lookup) for part, (lookup, _) in zip(parts, maps, strict=True)]
            if any(len(piece) for piece in pieces):  # payload columns: empty where a chunk has none
                pieces = [_padded(piece, count) for piece, count in zip(pieces, rows, strict=True)]
                values = np.concatenate(pieces)[order]
            else:
                values = np.zeros(0, pieces[0].dtype)
            setattr(joined, column.name, array(getattr(joined, column.name).typecode, values.tobytes()))
    keep_launch(launch, path)


def _padded(values, rows: int):
    """A chunk's payload column, zeros where the chunk kept none (no payload in it)."""
    import numpy as np

    return values if len(values) == rows else np.zeros(rows, values.dtype)


def _mapped(values, lookup: list[int]):
    """``values`` looked up in ``lookup`` (those outside it, -1 for none, kept)."""
    import numpy as np

    values = np.asarray(values, np.int64)
    table = np.asarray(lookup, np.int64)
    inside = (values >= 0) & (values < len(table))
    return np.where(inside, table[np.where(inside, values, 0)], values).astype(np.int32)


def assemble(path: Path, launches: list[trace_mod.Launch], maps: list, strings: list, locations: list):
    """The whole trace of ``path`` from its parts' launches (in order) and the merge's
    tables; ``maps`` holds each part's (names, locations) lookup, as :class:`.join.Merger`
    rewrote the file's indices."""
    for launch, (names, locs) in zip(launches, maps, strict=True):
        for kind in _KINDS:
            columns = getattr(launch, kind)
            for column, lookup in (("name", names), ("loc", locs)):
                values = getattr(columns, column)
                if len(values) and not indices.unchanged(lookup):
                    setattr(columns, column, array("i", _mapped(values, lookup).tobytes()))
    return trace_mod.Trace(Path(path), launches, strings, locations)
