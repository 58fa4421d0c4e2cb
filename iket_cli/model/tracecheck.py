"""What a trace must hold before any reader uses it: refused here, in one line, where the
readers would otherwise trip (a traceback) or allocate without bound.

Both trace readers (:mod:`.trace`'s scanner of the decoder's layout, and its general JSON
path) accept what is JSON of the right shape; :func:`checked` then refuses tables of the
wrong shape, indices outside the location and string tables (one index of a billion would
make a reader allocate a billion rows), ids too large for the 32-bit columns, and ranges or
warps that end before they start.
"""

from __future__ import annotations

from dataclasses import fields

from ..errors import ManifestError


def checked(trace):
    """Refuse, in one line, what the readers accept but every user of the model would trip on:
    tables of the wrong shape, and ranges or warps that end before they start. Names that are
    not text (a lone UTF-16 surrogate, which JSON can spell as ``\\ud800``) are kept with
    "?" in its place: nothing could write them to a file or a terminal."""
    where = f"trace {trace.path}"
    hint = "give a *.trace.json that run-iket or iket wrote, or decode it again: iket postprocess DIR"
    if not isinstance(trace.strings, list) or not all(isinstance(text, str) for text in trace.strings):
        raise ManifestError(f"{where}: its stringTable is not a list of strings", hint=hint)
    trace.strings = _writable(trace.strings)
    for launch in trace.launches:
        if isinstance(launch.kernel, str):
            launch.kernel = _writable([launch.kernel])[0]
    if not isinstance(trace.locations, list):
        raise ManifestError(f"{where}: its locationTable is not a list", hint=hint)
    for number, location in enumerate(trace.locations):
        if not _is_location(location):
            raise ManifestError(f"{where}: locationTable[{number}] is not a warp location", hint=hint)
    for number, launch in enumerate(trace.launches):
        if not isinstance(launch.kernel, str) or not _dims(launch.grid) or not _dims(launch.block):
            raise ManifestError(f"{where}: launch {number} has no kernel name, grid or block", hint=hint)
        if not isinstance(launch.grid_id, int) or isinstance(launch.grid_id, bool):
            raise ManifestError(f"{where}: launch {number} has no gridId", hint=hint)
        for kind in ("ranges", "markers", "warps"):
            if not _aligned(getattr(launch, kind)):
                raise ManifestError(f"{where}: launch {number} has {kind} of uneven columns", hint=hint)
        for kind in ("markers", "ranges", "warps"):
            stray = _outside_tables(getattr(launch, kind), len(trace.locations), len(trace.strings), kind)
            if stray is not None:
                raise ManifestError(f"{where}: in launch {number} {stray}", hint=hint)
        for kind in ("ranges", "warps"):
            backwards = _ends_before_start(getattr(launch, kind))
            if backwards is not None:
                raise ManifestError(
                    f"{where}: in launch {number} ({launch.kernel}) one of the {kind} ends before it "
                    f"starts (record {backwards})",
                    hint=hint,
                )
    return trace


def _aligned(columns) -> bool:
    """Every optional column is either empty or one value per record."""
    size = len(columns)
    return all(
        len(getattr(columns, c.name)) in (0, size) for c in fields(columns) if c.name != "end"
    ) and len(columns.end) in (0, size)


#: The largest grid dimension, CTA index, SM, TPC, GPC or warp id a trace may hold (CUDA's
#: grid limit is 2**31 - 1): larger ones are damage, and overflow the 32-bit columns.
MAX_INDEX = 2**31 - 1


def _is_location(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    cta = value.get("ctaId")
    ints = [value.get("smId"), value.get("warpId")]
    ints += [value[key] for key in ("tpcId", "gpcId") if key in value]
    return isinstance(cta, list) and len(cta) == 3 and all(_index(v) for v in (*cta, *ints))


def _index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INDEX


def _dims(value: object) -> bool:
    return isinstance(value, tuple) and len(value) == 3 and all(_index(v) for v in value)


def _outside_tables(columns, locations: int, strings: int, kind: str) -> str | None:
    """What of ``columns`` points outside the location or string table (a record's warp or
    name), or None. Every reader indexes the tables by these: one index of a billion would
    make them allocate a billion rows. A range may have no location (-1); warps no name."""
    import numpy as np

    checks = [("locIdx", columns.loc, -1 if kind == "ranges" else 0, locations)]
    if kind != "warps":
        checks.append(("name index", columns.name, 0, strings))
    for what, values, low, high in checks:
        if not len(values):
            continue
        found = np.frombuffer(values, dtype=np.int32)
        bad = np.flatnonzero((found < low) | (found >= high))
        if len(bad):
            table = "locationTable" if what == "locIdx" else "stringTable"
            return (
                f"{kind} record {int(bad[0])} has {what} {int(found[bad[0]])}, outside its {table} ({high})"
            )
    return None


def _ends_before_start(columns) -> int | None:
    """The first record whose end is before its start, or None (numpy, in one pass)."""
    if not len(columns):
        return None
    import numpy as np

    start = np.frombuffer(columns.start, dtype=np.int64) if columns.start.itemsize == 8 else None
    end = np.frombuffer(columns.end, dtype=np.int64) if columns.end.itemsize == 8 else None
    if start is None or end is None or len(start) != len(end):
        return 0
    bad = np.flatnonzero(end < start)
    return int(bad[0]) if len(bad) else None


def _writable(texts: list[str]) -> list[str]:
    """``texts`` with what UTF-8 cannot hold replaced (the common case, all of it can, costs
    one encode of the whole table)."""
    try:
        "".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        return [text.encode("utf-8", "replace").decode("utf-8") for text in texts]
    return texts
