"""The JSON export, split by launch and merged back byte for byte.

The decoder's JSON export grows faster than the capture: on keep256 (two launches) the
whole export took 15.0 s here while each launch alone took 2.8 s, init included. A raw
capture manifest that keeps one launch decodes on its own, so each decodable launch can
be exported in parallel and the results merged. The parts differ only in their tables:
each has its own ``stringTable`` and ``locationTable``, and the whole export's tables are
those of the first part followed by each later part's new entries, in the order they
appear. Merging therefore appends new table entries and rewrites the four index fields of
the later parts' launches (``rangeNameIdx``, ``markerNameIdx``, ``locIdx``,
``warpLocIdxs``); everything else is copied as bytes. The rewrite is numpy's
(:func:`remapped`): on keep256's second launch (151 MB, 1.6M indices) 1.8 s against 4.1 to
5.4 s for a regular expression with a callback per index, and the whole merge 2.7 s against
5.0 s, its bytes those of the decoder's whole export (2-core machine).

:mod:`.pool` runs the launches as decodes of their own, side by side within ``--jobs``, and
feeds each to a :class:`Merger` in launch order as soon as it and those before it are done:
keep256's JSON export with ``-j 2`` takes 0.70x of ``-j 1`` and 0.61x of run-iket's (2-core
machine, docs/benchmarks.md). :func:`export_json` is the sequential form, for small captures
decoded in the CLI's own process.
"""

from __future__ import annotations

import json
from pathlib import Path

from .tasks import part_name, spool_name

#: Huge strings are written in slices, so a 907 MB JSON export is never held twice.
WRITE_SLICE = 1 << 26

_LAUNCHES = b'"launches":['
_TABLES = b'],"locationTable":'


def decodable_launches(raw: Path) -> int:
    """How many parts :func:`part_manifests` would write (0 or 1: not split)."""
    try:
        data = json.loads(raw.read_bytes())
    except (OSError, ValueError):
        return 0
    if not isinstance(data, dict) or data.get("graphLaunches"):
        return 0
    return sum(
        1 for launch in data.get("launches", []) if isinstance(launch, dict) and launch.get("canDecode")
    )


def part_manifests(raw: Path) -> list[Path] | None:
    """Write one raw manifest per decodable launch beside ``raw``; None if not worth it.

    The parts sit in the same folder, so their data references (relative file names; the
    decoder aborts on absolute ones) still point at the original ``iket.data.bin``.
    """
    data = json.loads(raw.read_bytes())
    decodable = [launch for launch in data.get("launches", []) if launch.get("canDecode")]
    if len(decodable) < 2 or data.get("graphLaunches"):
        return None
    parts = []
    for number, launch in enumerate(decodable):
        path = raw.with_name(part_name(raw.name, number))
        path.write_text(json.dumps({**data, "launches": [launch]}))
        parts.append(path)
    return parts


def _split(text: bytes) -> tuple[bytes, bytes, dict]:
    """(head up to the launches, the launches' bytes, the parsed tail with the tables)."""
    start = text.index(_LAUNCHES) + len(_LAUNCHES)
    end = text.rindex(_TABLES)
    tail = json.loads(b"{" + text[end + 2 :])
    return text[:start], text[start:end], tail


def export_json(raw: Path, out: Path, decoder_class) -> bool:
    """Write the whole JSON export of ``raw`` to ``out`` by launches; False if unsplittable.

    Parts are decoded one after another (each launch alone is much cheaper than its share
    of the whole export) and spooled to temporary files, so at most one part is in memory.
    """
    parts = part_manifests(raw)
    if parts is None:
        return False
    spooled = [part.with_name(spool_name(part.name)) for part in parts]
    try:
        for part, spool in zip(parts, spooled, strict=True):
            decoder = decoder_class(str(part))
            try:
                text = decoder.export_decoded_json()
            finally:
                decoder.close()
            with open(spool, "w", encoding="utf-8") as handle:
                write_slices(handle, text)
            del text
        with open(out, "wb") as handle:
            merge(spooled, handle)
    finally:
        for path in [*parts, *spooled]:
            path.unlink(missing_ok=True)
    return True


def write_slices(handle, text: str) -> None:
    """Write ``text`` to a text file in slices: the encoded copy never exceeds one slice."""
    for start in range(0, len(text), WRITE_SLICE):
        handle.write(text[start : start + WRITE_SLICE])


def merge(parts: list[Path], out) -> None:
    """Write the whole export, built from single-launch exports (in launch order), to ``out``."""
    merger = Merger(out)
    for path in parts:
        merger.add(path)
    merger.finish()


class Merger:
    """The merge, one part at a time in launch order: a part is written as soon as it and
    the parts before it are exported, while later launches are still being decoded."""

    def __init__(self, out) -> None:
        self.out = out
        self.strings: list = []
        self.locations: list = []
        self.string_at: dict = {}
        self.location_at: dict = {}
        self.tail: dict = {}
        self.count = 0

    def add(self, path: Path) -> None:
        head, body, self.tail = _split(path.read_bytes())
        name_map = [_index(self.string_at, self.strings, s, s) for s in self.tail["stringTable"]]
        loc_map = [
            _index(self.location_at, self.locations, _key(loc), loc) for loc in self.tail["locationTable"]
        ]
        self.out.write(head if self.count == 0 else b",")
        self.out.write(_remap(body, name_map, loc_map))
        self.count += 1

    def finish(self) -> None:
        rest = {key: value for key, value in self.tail.items() if key not in ("locationTable", "stringTable")}
        tables = {"locationTable": self.locations, **rest, "stringTable": self.strings}
        text = json.dumps(dict(sorted(tables.items())), separators=(",", ":"), ensure_ascii=False)
        self.out.write(b"]," + text[1:].encode("utf-8"))


def _key(location: dict) -> str:
    return json.dumps(location, sort_keys=True)


def _index(index: dict, table: list, key, value) -> int:
    if key not in index:
        index[key] = len(table)
        table.append(value)
    return index[key]


def _remap(body: bytes, names: list[int], locs: list[int]) -> bytes | bytearray:
    """Rewrite the table indices of one part's launches (see :func:`remapped`)."""
    if names == list(range(len(names))) and locs == list(range(len(locs))):
        return body
    return remapped(body, names, locs)


#: The bytes that end each index key: ``Idx":`` (rangeNameIdx, markerNameIdx: the byte before
#: is ``e``; locIdx: ``c``) and ``Idxs":[`` (warpLocIdxs). No other key of the export holds them.
_SCALAR, _LIST = b'Idx":', b'Idxs":['


def remapped(body: bytes, names: list[int], locs: list[int]) -> bytes | bytearray:
    """``body`` with every ``rangeNameIdx``/``markerNameIdx`` looked up in ``names`` and every
    ``locIdx``/``warpLocIdxs`` entry in ``locs``, with numpy, no Python per index.

    The keys are found by their last bytes and their numbers parsed digit by digit, all at
    once; only the numbers that change are written. One that keeps its number of digits (a
    reordered table: the usual case) is overwritten in place in one vectorised store; the
    few whose length changes are spliced in, one slice per number.
    """
    import numpy as np

    data = np.frombuffer(body, np.uint8)
    starts, ends, values, tables = _numbers(data)
    lookup = [np.asarray(names, np.int64), np.asarray(locs, np.int64)]
    new = np.empty(len(values), np.int64)
    for which in (0, 1):
        chosen = tables == which
        new[chosen] = lookup[which][values[chosen]]
    changed = new != values
    longer = changed & (_lengths(new) != ends - starts)
    same = changed & ~longer
    out = bytearray(body)  # the one copy; numpy writes into it
    lengths = ends[same] - starts[same]
    np.frombuffer(out, np.uint8)[np.repeat(starts[same], lengths) + _ramp(lengths)] = _digits(new[same])
    if not longer.any():
        return bytes(out) if len(out) < (1 << 20) else out
    spliced = zip(starts[longer].tolist(), ends[longer].tolist(), new[longer].tolist(), strict=True)
    view, pieces, done = memoryview(out), [], 0
    for start, end, value in spliced:
        pieces += [view[done:start], b"%d" % value]
        done = end
    pieces.append(view[done:])
    return b"".join(pieces)


def _numbers(data):
    """(start, end, value, table) of every index number in ``data``, in order; table 0 is
    the string table, 1 the location table."""
    import numpy as np

    found = []
    for key, kind in ((_SCALAR, "scalar"), (_LIST, "list")):
        at = _find(data, key)
        first = at + len(key)
        if kind == "scalar":
            table = np.where(data[at - 1] == ord("c"), 1, 0)
            start, end, value = _parse(data, first)
            found.append((start, end, value, table))
            continue
        while len(first):  # the list's entries, one column at a time: [a,b,c]
            start, end, value = _parse(data, first)
            has = end > start
            found.append((start[has], end[has], value[has], np.ones(int(has.sum()), np.int64)))
            more = has & (data[np.minimum(end, len(data) - 1)] == ord(","))
            first = end[more] + 1
    start, end, value, table = (np.concatenate(column) for column in zip(*found, strict=True))
    order = np.argsort(start, kind="stable")
    return start[order], end[order], value[order], table[order]


def _find(data, key: bytes):
    """Every position of ``key`` in ``data`` (numpy, by its first byte then the rest)."""
    import numpy as np

    at = np.flatnonzero(data[: len(data) - len(key) + 1] == key[0])
    for offset, byte in enumerate(key[1:], start=1):
        at = at[data[at + offset] == byte]
    return at


def _parse(data, first):
    """(start, end, value) of the decimal number at each position (end = start when none)."""
    import numpy as np

    value = np.zeros(len(first), np.int64)
    end = first.copy()
    alive = np.ones(len(first), bool)
    while alive.any():
        at = np.minimum(end, len(data) - 1)
        digit = data[at].astype(np.int64) - ord("0")
        alive &= (end < len(data)) & (digit >= 0) & (digit <= 9)
        value[alive] = value[alive] * 10 + digit[alive]
        end[alive] += 1
    return first, end, value


def _lengths(values):
    """Decimal digits of each non-negative value."""
    import numpy as np

    lengths = np.ones(len(values), np.int64)
    bound = 10
    while (values >= bound).any():
        lengths += values >= bound
        bound *= 10
    return lengths


def _digits(values):
    """The decimal digits of all values, one after another, as ASCII bytes."""
    import numpy as np

    if not len(values):
        return np.zeros(0, np.uint8)
    lengths = _lengths(values)
    power = np.repeat(lengths, lengths) - 1 - _ramp(lengths)  # the place of each digit
    number = np.repeat(values, lengths)
    return ((number // (10**power)) % 10 + ord("0")).astype(np.uint8)


def _ramp(lengths):
    """0, 1, .., n-1 for each n in ``lengths``, one after another."""
    import numpy as np

    total = int(lengths.sum())
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(total) - starts
