"""A launch's columns scanned by the worker that exported it, and a process's trace
assembled from them.

With ``html`` among the formats, the report, lint and summary read each process's JSON
trace after it is written. For a JSON export split by launches (:mod:`.splitjson`), each
part's worker scans its own part into the columnar model (:func:`iket_cli.model.trace.load`
of a one-launch file) while the other launches still decode, and keeps the columns beside
its spool (:func:`keep`); once the parts are merged, the whole trace is assembled from them
(:func:`assemble`: the name and location columns looked up in the merged tables, as the
merge rewrote them in the file) and handed to the report (:func:`iket_cli.model.memo.hold`),
which then never reads the merged file.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import fields
from pathlib import Path

from ..model import trace as trace_mod

_KINDS = ("ranges", "markers", "warps")


def wanted(formats: tuple[str, ...]) -> bool:
    """Whether a JSON export for these formats is read back by the report (and lint)."""
    return "html" in formats


def keep(spooled: Path, path: Path) -> None:
    """Scan the one-launch export ``spooled`` and keep its columns in ``path`` (``.npz``)."""
    import numpy as np

    loaded = trace_mod.load(spooled)
    (launch,) = loaded.launches
    head = {
        "kernel": launch.kernel,
        "grid": launch.grid,
        "block": launch.block,
        "grid_id": launch.grid_id,
        "cluster": launch.cluster,
    }
    arrays = {"head": np.frombuffer(json.dumps(head).encode(), np.uint8)}
    for kind in _KINDS:
        for column in fields(trace_mod.Columns):
            values = getattr(getattr(launch, kind), column.name)
            arrays[f"{kind}.{column.name}"] = np.asarray(values)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def read(path: Path) -> trace_mod.Launch:
    """The launch :func:`keep` kept, its indices still those of its own part's tables."""
    import numpy as np

    with np.load(path) as kept:
        head = json.loads(kept["head"].tobytes())
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


def assemble(path: Path, launches: list[trace_mod.Launch], maps: list, strings: list, locations: list):
    """The whole trace of ``path`` from its parts' launches (in order) and the merge's
    tables; ``maps`` holds each part's (names, locations) lookup, as :class:`.splitjson.Merger`
    rewrote the file's indices."""
    import numpy as np

    for launch, (names, locs) in zip(launches, maps, strict=True):
        for kind in _KINDS:
            columns = getattr(launch, kind)
            for column, lookup in (("name", names), ("loc", locs)):
                values = getattr(columns, column)
                if len(values) and lookup != list(range(len(lookup))):
                    looked = np.asarray(lookup, np.int32)[np.asarray(values, np.int64)]
                    setattr(columns, column, array("i", looked.tobytes()))
    return trace_mod.Trace(Path(path), launches, strings, locations)
