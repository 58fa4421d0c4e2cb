"""Protocol-buffer varints and fields read and written side by side in numpy.

A Perfetto trace is protobuf: each field a key varint, then a varint value or a length and
bytes. Joining parts of an export rewrites thousands of varints (track uuids and the
lengths around them): here they are read (:func:`widths`, :func:`values`), found in many
messages at once (:func:`field`), and rewritten, inserted or deleted as arrays
(:func:`edited`), over a buffer padded with zeros (:func:`padded`) so that reads past a
message never leave it.
"""

from __future__ import annotations

import numpy as np

#: Fields skipped, at most, before the one looked for (the decoder writes two or three).
MOST_FIELDS = 8
#: Bytes a varint takes at most here (a uuid or length below 2**35).
MOST_DIGITS = 5
#: Bytes a varint takes at most (a 64-bit value).
VARINT_BYTES = 10
#: Zero bytes after a copy of the events, so that reads past a packet never leave the array.
PAD = 16


def padded(data: bytes) -> np.ndarray:
    """``data`` as a writable uint8 array with :data:`PAD` zero bytes after it."""
    buf = np.zeros(len(data) + PAD, np.uint8)
    buf[: len(data)] = np.frombuffer(data, np.uint8)
    return buf


def widths(a: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The bytes taken by the varint at each offset ``at``."""
    width = np.ones(len(at), np.int64)
    going = np.flatnonzero(a[at] >= 0x80)
    k = 1
    while len(going) and k < VARINT_BYTES:
        width[going] += 1
        going = going[a[at[going] + k] >= 0x80]
        k += 1
    return width


def values(a: np.ndarray, at: np.ndarray, width: np.ndarray) -> np.ndarray:
    value = a[at].astype(np.int64) & 0x7F
    longer = np.flatnonzero(width > 1)
    for k in range(1, MOST_DIGITS):
        if not len(longer):
            break
        value[longer] |= (a[at[longer] + k].astype(np.int64) & 0x7F) << (7 * k)
        longer = longer[width[longer] > k + 1]
    return value


def field(a: np.ndarray, cur: np.ndarray, end: np.ndarray, key: int) -> np.ndarray:
    """The offset of field ``key`` (a one-byte key) in each message ``[cur, end)``, or -1:
    the messages' fields skipped side by side."""
    found = np.full(len(cur), -1, np.int64)
    live = np.arange(len(cur))
    at, stop = cur.astype(np.int64), end.astype(np.int64)
    for _ in range(MOST_FIELDS):
        if not len(live):
            break
        inside = at < stop
        k = a[np.where(inside, at, 0)]
        hit = inside & (k == key)
        found[live[hit]] = at[hit]
        go = inside & ~hit & (k < 0x80)
        live, at, stop, k = live[go], at[go], stop[go], k[go]
        after = at + 1
        nxt = a[after]
        wire = k & 7
        skip = np.where(
            wire == 2, 1 + nxt.astype(np.int64), np.where(wire == 1, 8, np.where(wire == 5, 4, 1))
        )
        odd = np.flatnonzero((nxt >= 0x80) & ((wire == 0) | (wire == 2)) | (wire == 3) | (wire == 4))
        if len(odd):  # a varint of several bytes, a long field, or a group: the general way
            width = widths(a, after[odd])
            long = wire[odd] == 2
            skip[odd] = np.where(long, width + values(a, after[odd], width), width)
            skip[odd[(wire[odd] == 3) | (wire[odd] == 4)]] = 1 << 62  # groups: not looked into
        at = after + skip
    return found


def digits(value: np.ndarray) -> np.ndarray:
    """The bytes each value takes as a varint."""
    top = int(value.max()) if len(value) else 0
    if top >= 1 << (7 * MOST_DIGITS):
        raise ValueError("a uuid or length too large to rewrite here")
    width = np.ones(len(value), np.int64)
    for k in range(1, MOST_DIGITS):
        if top < 1 << (7 * k):
            break
        width += value >= 1 << (7 * k)
    return width


def edited(buf: np.ndarray, at: np.ndarray, old: np.ndarray, values: np.ndarray, cuts: list) -> np.ndarray:
    """``buf`` with the varint at each ``at`` (``old`` bytes long) replaced by ``values``
    (its digits written in place, missing ones inserted, extra ones deleted), and the byte
    ranges ``cuts`` deleted. Most varints keep their width: only the few that do not, and
    the cuts, move bytes (one pass of the buffer for all the insertions)."""
    new = digits(values)
    _write(buf, at, values, new, np.minimum(old, new))
    grow, shrink = np.flatnonzero(new > old), np.flatnonzero(new < old)
    ranges = [(int(b), int(e)) for b, e in cuts if e > b]
    if len(shrink):
        ranges += zip((at[shrink] + new[shrink]).tolist(), (at[shrink] + old[shrink]).tolist(), strict=True)
    if not len(grow):
        return _cut(buf, ranges)
    # each missing digit goes after the varint's old bytes, in the order of its rank
    count = new[grow] - old[grow]
    which = np.repeat(grow, count)
    rank = old[which] + np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count)
    digit = ((values[which] >> (7 * rank)) & 0x7F) | np.where(new[which] > rank + 1, 0x80, 0)
    places = at[which] + old[which]
    order = np.argsort(places, kind="stable")
    return _cut(_inserted(buf, places[order], digit[order].astype(np.uint8)), _moved(ranges, places))


def _write(buf: np.ndarray, at: np.ndarray, values: np.ndarray, width: np.ndarray, count: np.ndarray) -> None:
    """The first ``count`` digits of each value (``width`` digits in all) written at ``at``."""
    live = np.arange(len(at))
    for k in range(MOST_DIGITS):
        live = live[count[live] > k]
        if not len(live):
            return
        more = (width[live] > k + 1).astype(np.uint8) << 7
        buf[at[live] + k] = ((values[live] >> (7 * k)) & 0x7F).astype(np.uint8) | more


def _inserted(buf: np.ndarray, places: np.ndarray, what: np.ndarray) -> np.ndarray:
    """``buf`` with ``what[i]`` before byte ``places[i]`` (``places`` sorted)."""
    out = np.empty(len(buf) + len(places), np.uint8)
    moved = places + np.arange(len(places))
    out[moved] = what
    kept = np.ones(len(out), bool)
    kept[moved] = False
    out[kept] = buf
    return out


def _moved(ranges: list[tuple[int, int]], places: np.ndarray) -> list[tuple[int, int]]:
    """Byte ranges of a buffer as they lie after bytes are inserted at ``places`` (sorted)."""
    if not ranges:
        return []
    begin, end = np.asarray(ranges, np.int64).T
    begin = begin + np.searchsorted(places, begin, side="right")
    end = end + np.searchsorted(places, end, side="left")
    return list(zip(begin.tolist(), end.tolist(), strict=True))


def _cut(buf: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """``buf`` without the byte ranges ``ranges`` (which do not overlap)."""
    if not ranges:
        return buf
    ranges = sorted(ranges)
    if len(ranges) > 4096:  # many small ones: numpy's own
        return np.delete(buf, np.concatenate([np.arange(b, e) for b, e in ranges]))
    starts = [0] + [e for _, e in ranges]
    stops = [b for b, _ in ranges] + [len(buf)]
    return np.concatenate([buf[s:e] for s, e in zip(starts, stops, strict=True)])
