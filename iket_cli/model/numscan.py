"""Vectorised number extraction from one launch of a compact ``*.trace.json``.

The regex scan in :mod:`iket_cli.model.trace` spends most of its time in Python: a match object
per record and an ``int()`` per number, millions of them in a big trace. Here each record kind's
array is cut into chunks of a few MB at record boundaries and handled by numpy: one pass
finds every digit run, the wanted runs are picked by position (fixed stride for markers and
warp lifetimes, anchored on each range's ``rangeColor`` key for ranges, whose internal
events vary in number), and their digits are gathered into a fixed-width byte matrix that
numpy parses as integers in C.

Nothing is assumed unchecked: every picked number must be preceded by its own key (for
example ``"startTs":``) and followed by ``,``, ``}`` or ``]``, so a reordered key, a
negative or floating-point value or an extra field makes :func:`launch_columns` answer
``None`` and the caller falls back to the regex scan for that launch.
"""

from __future__ import annotations

import mmap
from array import array
from collections.abc import Iterator

import numpy as np

CHUNK = 1 << 23  # bytes per chunk: keeps the temporaries of a 288 MB trace near 50 MB
#: A launch of at most this many bytes is read by json instead: numpy's cost per call
#: (a few dozen calls a launch) outweighs its speed on a few records (a warp trace of a
#: model holds thousands of launches of a few warps each).
SMALL = 1 << 14


class Layout(Exception):
    """The bytes are not in the layout this scanner reads (the caller falls back)."""


def launch_columns(
    data: mmap.mmap | bytes, start: int, end: int, kinds: tuple[str, ...] = ("markers", "ranges", "warps")
) -> dict[str, dict[str, array]] | None:
    """Columns of the launch whose body (after ``kernelName``) is ``data[start:end]``.

    Returns ``{"markers": {...}, "ranges": {...}, "warps": {...}}`` (those in ``kinds``: a
    reader that needs no markers skips their scan) with ``array`` columns named as
    :class:`iket_cli.model.trace.Columns` fields, or ``None`` if the layout differs.
    """
    regions = _regions(data, start, end)
    if regions is None:
        return None
    (m_from, m_to), (r_from, r_to), (w_from, w_to) = regions
    if end - start <= SMALL:
        return _small(data, regions, kinds)
    scans = {
        "markers": lambda: _fixed(data, m_from, m_to, b'},{"color":', _MARKER_KEYS),
        "ranges": lambda: _ranges(data, r_from, r_to),
        "warps": lambda: _fixed(data, w_from, w_to, b'},{"endTs":', _WARP_KEYS),
    }
    try:
        return {kind: scan() for kind, scan in scans.items() if kind in kinds}
    except (Layout, OverflowError, ValueError):
        return None


# (key before the number, column it fills or None to only check it), in record order.
_MARKER_KEYS = (
    (b'{"color":', None),
    (b'"locIdx":', "loc"),
    (b'"markerNameIdx":', "name"),
    (b'"timestamp":', "start"),
)
_WARP_KEYS = ((b'{"endTs":', "end"), (b'"locIdx":', "loc"), (b'"startTs":', "start"))


#: Each record kind's keys in the decoder's order, and the columns they fill (None: checked only).
_JSON_KEYS = {
    "markers": (("color", None), ("locIdx", "loc"), ("markerNameIdx", "name"), ("timestamp", "start")),
    "warps": (("endTs", "end"), ("locIdx", "loc"), ("startTs", "start")),
    "ranges": (
        ("endTs", "end"),
        ("internalEvents", None),
        ("rangeColor", None),
        ("rangeId", None),
        ("rangeNameIdx", "name"),
        ("rangeScope", None),
        ("rangeType", "kind"),
        ("startTs", "start"),
        ("warpLocIdxs", "loc"),
    ),
}


def _small(data, regions, kinds: tuple[str, ...]) -> dict[str, dict[str, array]] | None:
    """A small launch's columns by ``json.loads`` of each record array, with the checks the
    vectorised scan makes: the same keys in the same order, non-negative integers."""
    import json

    out = {}
    for kind, (start, stop) in zip(("markers", "ranges", "warps"), regions, strict=True):
        if kind not in kinds:
            continue
        try:
            records = json.loads(bytes(data[start - 1 : stop + 1]))
        except (ValueError, RecursionError):
            return None
        keys = _JSON_KEYS[kind]
        names = tuple(key for key, _ in keys)
        columns: dict[str, list[int]] = {name: [] for _, name in keys if name}
        for record in records:
            if not isinstance(record, dict) or tuple(record) != names:
                return None
            for key, name in keys:
                value = record[key]
                if kind == "ranges" and key in ("internalEvents", "warpLocIdxs"):
                    if not isinstance(value, list):
                        return None
                    if key == "internalEvents":
                        continue
                    if not value:  # a range of no warp: location -1, as the scan says
                        columns[name].append(-1)
                        continue
                    value = value[0]
                if type(value) is not int or value < 0:
                    return None
                if name:
                    columns[name].append(value)
        try:
            out[kind] = {name: _to_array([np.array(v, np.int64)], name) for name, v in columns.items()}
        except OverflowError:
            return None
    return out


def find(data, needle: bytes, start: int, end: int) -> int:
    """``data.find`` in windows of ``CHUNK``, dropping each searched window's pages.

    A plain ``find`` over a big trace's mapping makes all of it resident at once; this keeps
    the resident part of the file near one window.
    """
    at = start
    while at < end:
        stop = min(end, at + CHUNK + len(needle) - 1)
        found = data.find(needle, at, stop)
        if found >= 0:
            return found
        _forget(data, at, min(end, at + CHUNK))
        at += CHUNK
    return -1


def _regions(data, start: int, end: int) -> tuple[tuple[int, int], ...] | None:
    """Byte ranges of the markers, ranges and warp lifetime arrays (keys are sorted)."""
    found = []
    at = start
    for key in (b'"markers":[', b'"ranges":[', b'"warpLifetimes":['):
        at = find(data, key, at, end)
        if at < 0:
            return None
        found.append(at)
        at += len(key)
    bounds = [*found[1:], end]
    regions = []
    for key_at, key, bound in zip(found, (11, 10, 17), bounds, strict=True):
        close = data.rfind(b"]", key_at, bound)
        if close < key_at + key:
            return None
        regions.append((key_at + key, close))
    return tuple(regions)


def _chunks(data, start: int, stop: int, separator: bytes) -> Iterator[_Chunk]:
    """The region in pieces that each begin with ``{`` of a record.

    Each piece is copied out of ``data`` (a memcpy of a few MB), so no numpy view keeps
    the caller's mmap alive; its pages are dropped from the resident set once read.
    """
    at = start
    while at < stop:
        cut = min(stop, at + CHUNK)
        if cut < stop:
            found = data.find(separator, cut, stop)
            cut = stop if found < 0 else found + 2
        yield _Chunk(data[at:cut])
        _forget(data, at, cut)
        at = cut


def _forget(data, start: int, stop: int) -> None:
    """Drop read pages of a file mapping from the resident set (they stay in the page cache)."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        first = start - start % mmap.PAGESIZE
        last = stop - stop % mmap.PAGESIZE
        if last > first:
            data.madvise(mmap.MADV_DONTNEED, first, last - first)


_ZEROS = np.uint64(0x3030303030303030)  # eight ASCII "0"
_U8 = np.uint64(8)


class _Chunk:
    """One piece of a record array: its bytes, its digit runs, and an unaligned 8-byte view.

    ``words[p]`` is the little-endian uint64 of the 8 bytes starting at ``p``: one gather
    reads a whole key suffix or eight digits at once.
    """

    def __init__(self, raw: bytes) -> None:
        if len(raw) < 16:
            raw = raw + b" " * (16 - len(raw))  # room for one word; spaces are not digits
        self.raw = raw
        self.u = np.frombuffer(raw, np.uint8)
        self.words = np.ndarray((len(raw) - 7,), "<u8", raw, 0, (1,))
        digit = (self.u - 48) < 10  # uint8 arithmetic wraps: only b"0".."9" land below 10
        if digit[0] or digit[-1]:
            raise Layout("a chunk starts or ends inside a number")
        edges = np.flatnonzero(digit[1:] != digit[:-1]) + 1  # start, end, start, end, ...
        self.starts, self.ends = edges[0::2], edges[1::2]

    def has(self, needle: bytes) -> bool:
        """Whether the chunk's bytes hold ``needle`` (a C-speed search of bytes just copied)."""
        return self.raw.find(needle) >= 0

    def column(self, index: np.ndarray | slice, key: bytes) -> np.ndarray:
        """The runs at ``index`` as int64, each checked to follow ``key`` and end at a delimiter."""
        starts, ends = self.starts[index], self.ends[index]
        if not len(starts):
            return np.zeros(0, np.int64)
        suffix = key[-8:].rjust(8, b"\0")
        if len(suffix.lstrip(b"\0")) < 8 or int(starts.min()) < 8:
            raise Layout(f"no room for {key!r}")
        expected = np.uint64(int.from_bytes(suffix, "little"))
        if not (self.words[starts - 8] == expected).all():
            raise Layout(f"a number not after {key!r}")
        after = self.u[ends]
        if not ((after == 44) | (after == 125) | (after == 93)).all():  # , } ]
            raise Layout("a number that is not an integer")
        return _integers(self.words, ends, ends - starts)


def _integers(words: np.ndarray, ends: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Digit runs ending at ``ends`` as int64, eight digits per word (SWAR, as simdjson does).

    Bytes before a run are shifted out of its first word and replaced by ASCII zeros; three
    multiply-shift-mask steps turn eight ASCII digits into their value.
    """
    width = int(lengths.max())
    if width > 19:
        raise OverflowError("a number wider than int64")
    total = np.zeros(len(ends), np.uint64)
    for back, scale in ((8, 1), (16, 10**8), (24, 10**16)):
        if width <= back - 8:
            break
        have = np.clip(lengths - (back - 8), 0, 8).astype(np.uint64)  # digits in this word
        word = words[np.maximum(ends - back, 0)]
        drop = (_U8 - have) * _U8
        word = np.where(have > 0, (word >> drop) << drop, 0)
        word |= np.where(have < 8, _ZEROS >> np.minimum(have * _U8, np.uint64(63)), 0)
        word[have == 0] = _ZEROS
        value = word - _ZEROS
        value = (value * np.uint64(10) + (value >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
        value = (value * np.uint64(100) + (value >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
        value = (value * np.uint64(10000) + (value >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
        total += value * np.uint64(scale)
    if width == 19 and int(total.max()) > 2**63 - 1:
        raise OverflowError("a number wider than int64")
    return total.astype(np.int64)


def _fixed(data, start: int, stop: int, separator: bytes, keys) -> dict[str, array]:
    """A record kind whose records hold exactly ``len(keys)`` numbers each."""
    stride = len(keys)
    parts: dict[str, list[np.ndarray]] = {name: [] for _, name in keys if name}
    for chunk in _chunks(data, start, stop, separator):
        if len(chunk.starts) % stride:
            raise Layout("records with more or fewer numbers")
        for position, (key, name) in enumerate(keys):
            values = chunk.column(slice(position, None, stride), key)
            if name:
                parts[name].append(values)
    return {name: _to_array(chunks, name) for name, chunks in parts.items()}


def _ranges(data, start: int, stop: int) -> dict[str, array]:
    """Ranges: ``endTs`` opens each record; the other fields follow its ``rangeColor``.

    Sorted keys put ``internalEvents`` (any number of events) between ``endTs`` and
    ``rangeColor``; from ``rangeColor`` on, each record holds color, id, name index, scope,
    type, ``startTs`` and then its warp location indices (possibly none: loc -1).
    Ranges with payloads (CuTe DSL's token ranges) are left to the general reader, which
    keeps the payloads.
    """
    parts: dict[str, list[np.ndarray]] = {"end": [], "name": [], "start": [], "loc": [], "kind": []}
    for chunk in _chunks(data, start, stop, b'},{"endTs":'):
        if chunk.has(b'"payloadType"'):
            raise Layout("ranges with payloads")
        u, starts = chunk.u, chunk.starts
        records = np.flatnonzero((u[:-3] == ord("{")) & (u[2:-1] == ord("e")) & (u[3:] == ord("n")))
        colors = np.flatnonzero(u == ord("C"))  # only "rangeColor" has a capital C
        if len(records) != len(colors):
            raise Layout("records and rangeColor keys do not pair up")
        if not len(records):
            continue
        if not ((colors > records).all() and (colors[:-1] < records[1:]).all()):
            raise Layout("a rangeColor outside its record")
        first = np.searchsorted(starts, records)
        color = np.searchsorted(starts, colors)
        if int(color.max()) + 5 >= len(starts):
            raise Layout("a range record is cut short")
        chunk.column(color, b'"rangeColor":')
        parts["end"].append(chunk.column(first, b'{"endTs":'))
        parts["name"].append(chunk.column(color + 2, b'"rangeNameIdx":'))
        parts["kind"].append(chunk.column(color + 4, b'"rangeType":'))
        parts["start"].append(chunk.column(color + 5, b'"startTs":'))
        parts["loc"].append(_first_locations(chunk, color + 6, np.append(records[1:], len(u))))
    return {name: _to_array(chunks, name) for name, chunks in parts.items()}


def _first_locations(chunk: _Chunk, index: np.ndarray, next_record: np.ndarray) -> np.ndarray:
    """``warpLocIdxs[0]`` of each range, -1 where the list is empty."""
    inside = index < len(chunk.starts)
    safe = np.where(inside, index, 0)
    present = inside & (chunk.starts[safe] < next_record)
    locations = np.full(len(index), -1, np.int64)
    locations[present] = chunk.column(safe[present], b'"warpLocIdxs":[')
    return locations


def _to_array(chunks: list[np.ndarray], name: str) -> array:
    """One ``array`` column (``q`` for timestamps, ``i`` for indices), as trace.Columns holds."""
    joined = np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
    if name in ("start", "end"):
        out = array("q")
        out.frombytes(joined.astype(np.int64).tobytes())
    else:
        if len(joined) and (int(joined.max()) > 2**31 - 1 or int(joined.min()) < -1):
            raise OverflowError("an index wider than int32")
        out = array("i")
        out.frombytes(joined.astype(np.int32).tobytes())
    return out
