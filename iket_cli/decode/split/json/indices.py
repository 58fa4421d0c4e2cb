"""The table indices inside a JSON export's launches: found, kept, and rewritten with numpy.

A later part of a split JSON export (:mod:`.join`) has its own string and location
tables, so its ``rangeNameIdx``, ``markerNameIdx``, ``locIdx`` and ``warpLocIdxs`` numbers are
rewritten into the whole export's tables when it is merged. Finding those numbers is most
of that work (a scan of every byte) and needs nothing but the part itself, so the worker
that exported the part finds them (:func:`find`) while the other launches still decode and
keeps them beside its spool (:func:`save`); the merge only looks the new values up and
stores them in the part's own pages (:func:`rewrite`), a fraction of what scanning the part
itself costs (docs/history/benchmarks.md, "The rest of the decode, and the report, beside the decodes").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The arrays of :class:`Indices`, in order.
FIELDS = ("start", "end", "value", "key")
#: What :attr:`Indices.key` holds: the key each number belongs to.
RANGE_NAME, MARKER_NAME, LOC, WARP_LOC = range(4)


@dataclass
class Indices:
    """Every index number of a body: where it starts and ends, its value, and its key
    (:data:`RANGE_NAME`, :data:`MARKER_NAME`: the string table; :data:`LOC`,
    :data:`WARP_LOC`: the location table); numpy arrays, the scalars' before the lists'."""

    start: object
    end: object
    value: object
    key: object

    def __len__(self) -> int:
        return len(self.start)

    def taken(self, which) -> Indices:
        """The indices at ``which`` (a slice, an order or a mask of them)."""
        return Indices(*(getattr(self, name)[which] for name in FIELDS))

    def counts(self) -> tuple[int, int]:
        """(ranges, markers): one ``rangeNameIdx`` per range, one ``markerNameIdx`` per marker."""
        return _records(self.key)


def count(body) -> tuple[int, int]:
    """(ranges, markers) in ``body``, by their index keys alone (no number parsed)."""
    import numpy as np

    data = np.frombuffer(body, np.uint8)
    return _records(_scalar_keys(data, _keys(data)[0]))


def _records(keys) -> tuple[int, int]:
    """(ranges, markers) among index keys: one range name per range, one marker name per marker."""
    import numpy as np

    per_key = np.bincount(keys, minlength=4)
    return int(per_key[RANGE_NAME]), int(per_key[MARKER_NAME])


def _keys(data):
    """(the ``x`` of each scalar index key ``Idx":``, that of each list key ``Idxs":[``)."""
    size = len(data)
    at = _every(data, ord("x"))  # the x of every Idx and Idxs, and of nothing else
    at = at[(at >= 3) & (at + 2 < size)]
    at = at[(data[at - 2] == ord("I")) & (data[at - 1] == ord("d"))]
    after = data[at + 1]
    scalar = at[(after == ord('"')) & (data[at + 2] == ord(":"))]
    at = at[(after == ord("s")) & (at + 4 < size)]
    listed = at[(data[at + 2] == ord('"')) & (data[at + 3] == ord(":")) & (data[at + 4] == ord("["))]
    return scalar, listed


def find(body) -> Indices:
    """Every index number in ``body`` (bytes or a memoryview of them), with numpy: the keys
    are found by the one byte they all hold that nothing else in a launch does (``x``), and
    their numbers parsed digit by digit, all at once. In byte order (found in a worker, the
    order costs the stitch nothing)."""
    import numpy as np

    data = np.frombuffer(body, np.uint8)
    size = len(data)
    scalar, listed = _keys(data)
    start, end, value = _parse(data, scalar + 3)
    has = end > start  # a number, not a string or a list
    found = [(start[has], end[has], value[has], _scalar_keys(data, scalar[has]))]
    first = listed + 5
    while len(first):  # the list's entries, one column at a time: [a,b,c]
        start, end, value = _parse(data, first)
        has = end > start
        found.append((start[has], end[has], value[has], np.full(int(has.sum()), WARP_LOC, np.uint8)))
        more = has & (data[np.minimum(end, size - 1)] == ord(","))
        first = end[more] + 1
    everything = Indices(*(np.concatenate(column) for column in zip(*found, strict=True)))
    return everything.taken(np.argsort(everything.start, kind="stable"))  # sorted runs: a quick merge


def _scalar_keys(data, at):
    """The key of each ``Idx":`` whose ``x`` is at ``at``: ``locIdx`` has ``c`` three bytes
    before, ``markerNameIdx`` an ``r`` seven bytes before (``rangeNameIdx``: an ``e``)."""
    import numpy as np

    keys = np.full(len(at), RANGE_NAME, np.uint8)
    keys[data[at - 3] == ord("c")] = LOC
    keys[(data[at - 3] != ord("c")) & (data[np.maximum(at - 7, 0)] == ord("r"))] = MARKER_NAME
    return keys


def _every(data, byte: int):
    """Every position of ``byte`` in ``data``, scanned in slices: a comparison of the whole
    array at once would take a fresh mask as large as the part, and its fresh pages cost
    more than the scan itself (docs/history/benchmarks.md, "Figures behind the constants")."""
    import numpy as np

    found = [
        np.flatnonzero(data[at : at + SCAN_SLICE] == byte) + at for at in range(0, len(data), SCAN_SLICE)
    ]
    return np.concatenate(found) if found else np.zeros(0, np.int64)


#: Bytes compared at a time by :func:`_every` (its mask is reused from slice to slice).
SCAN_SLICE = 1 << 23


def save(indices: Indices, path: Path) -> None:
    """Keep ``indices`` in ``path`` (:mod:`.sidecar`: written and read in milliseconds)."""
    from .. import sidecar

    sidecar.save(path, {name: getattr(indices, name) for name in FIELDS})


def load(path: Path) -> Indices:
    """What :func:`save` kept."""
    from .. import sidecar

    kept, _ = sidecar.load(path)
    return Indices(*(kept[name] for name in FIELDS))


def rewrite(body, names: list[int], locs: list[int], indices: Indices | None = None) -> bool:
    """Rewrite ``body`` (a writable numpy byte array) in place: every ``rangeNameIdx``/
    ``markerNameIdx`` looked up in ``names``, every ``locIdx``/``warpLocIdxs`` entry in
    ``locs``, in one vectorised store. False, with nothing written, when some number would
    change its number of digits (:func:`remapped` splices those).

    ``indices``: the body's numbers as :func:`find` gives them (found now when None).
    """
    changes = _changes(body, names, locs, indices)
    if changes is None:
        return False
    overwrite(body, *changes)
    return True


def overwrite(body, start, length, new) -> None:
    """Store each of ``new`` over the digits at ``start`` (``length`` of them: the same count
    as its own) in ``body`` (a writable numpy byte array), in one vectorised store."""
    import numpy as np

    body[np.repeat(start, length) + _ramp(length)] = _digits(new)


def remapped(body, names: list[int], locs: list[int], indices: Indices | None = None) -> bytes | bytearray:
    """``body`` (bytes) with its indices rewritten as :func:`rewrite` does, as new bytes; the
    few numbers whose length changes are spliced in, one slice per number, in byte order."""
    import numpy as np

    out = bytearray(body)  # the one copy; numpy writes into it
    found = indices if indices is not None else find(body)
    if rewrite(np.frombuffer(out, np.uint8), names, locs, found):
        return bytes(out) if len(out) < (1 << 20) else out
    new = looked_up(found, names, locs)
    spliced = zip(*(a.tolist() for a in (found.start, found.end, new)), strict=True)  # byte order
    view, pieces, done = memoryview(out), [], 0
    for first, last, number in spliced:
        pieces += [view[done:first], b"%d" % number]
        done = last
    pieces.append(view[done:])
    return b"".join(pieces)


def spliced(body, found: Indices, new):
    """``body`` (a numpy byte array) with each index number ``found`` holds replaced by
    ``new`` (its new values, in ``found``'s order, sorted by position), all at once: the
    digits are placed by their shifted positions and the rest of the bytes fill the gaps.
    Returns the new bytes and where each number now starts (a split launch's chunks: their
    location indices grow digits as often as not, so :func:`rewrite` cannot serve)."""
    import numpy as np

    old = found.end - found.start
    lengths = digit_counts(new)
    delta = lengths - old
    starts = found.start + (np.cumsum(delta) - delta)
    out = np.empty(len(body) + int(delta.sum()), np.uint8)
    digits_at = np.repeat(starts, lengths) + _ramp(lengths)
    if not delta.any():  # no number changes length: the bytes stay where they are
        out[:] = body
    else:
        gaps = np.ones(len(out), bool)
        gaps[digits_at] = False
        kept = np.ones(len(body), bool)
        kept[np.repeat(found.start, old) + _ramp(old)] = False
        out[gaps] = body[kept]
    out[digits_at] = _digits(new)
    return out, starts


def unchanged(table: list[int]) -> bool:
    """Whether a table map leaves every index as it is (nothing to rewrite)."""
    return table == list(range(len(table)))


def looked_up(found: Indices, names: list[int], locs: list[int]):
    """Each index's new value: its table's map at its old value."""
    import numpy as np

    lookup = np.concatenate([np.asarray(names, np.int64), np.asarray(locs, np.int64)])
    return lookup[found.value + np.where(found.key >= LOC, len(names), 0)]


def _changes(body, names: list[int], locs: list[int], indices: Indices | None):
    """(start, length, new value) of the numbers that change; None if one changes length."""
    found = indices if indices is not None else find(body)
    new = looked_up(found, names, locs)
    changed = new != found.value
    length = found.end[changed] - found.start[changed]
    new = new[changed]
    if (digit_counts(new) != length).any():
        return None
    return found.start[changed], length, new


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


def digit_counts(values):
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
    lengths = digit_counts(values)
    power = np.repeat(lengths, lengths) - 1 - _ramp(lengths)  # the place of each digit
    number = np.repeat(values, lengths)
    return ((number // (10**power)) % 10 + ord("0")).astype(np.uint8)


def _ramp(lengths):
    """0, 1, .., n-1 for each n in ``lengths``, one after another."""
    import numpy as np

    total = int(lengths.sum())
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(total) - starts
