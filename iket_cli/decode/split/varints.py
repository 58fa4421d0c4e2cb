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
    if len(value) and int(value.max()) >= 1 << (7 * MOST_DIGITS):
        raise ValueError("a uuid or length too large to rewrite here")
    width = np.ones(len(value), np.int64)
    for k in range(1, MOST_DIGITS):
        width += value >= 1 << (7 * k)
    return width


def edited(buf: np.ndarray, at: np.ndarray, old: np.ndarray, values: np.ndarray, cuts: list) -> np.ndarray:
    """``buf`` with the varint at each ``at`` (``old`` bytes long) replaced by ``values``
    (its digits written in place, missing ones inserted, extra ones deleted), and the byte
    ranges ``cuts`` deleted."""
    new = digits(values)
    where, what = [], []
    deletes = [np.arange(b, e) for b, e in cuts]
    live = np.arange(len(values))
    for k in range(MOST_DIGITS):
        digit = ((values[live] >> (7 * k)) & 0x7F).astype(np.uint8) | (new[live] > k + 1).astype(
            np.uint8
        ) << 7
        inside = old[live] > k
        buf[at[live[inside]] + k] = digit[inside]
        added = live[~inside]
        where.append(at[added] + old[added])
        what.append(digit[~inside])
        live = live[new[live] > k + 1]
    for k in range(1, VARINT_BYTES):
        extra = np.flatnonzero((old > k) & (new <= k))
        deletes.append(at[extra] + k)
    gone = np.sort(np.concatenate(deletes))
    if len(gone):
        buf = np.delete(buf, gone)
    places = np.concatenate(where)
    if len(places):
        order = np.argsort(places, kind="stable")
        places = places[order]
        buf = np.insert(buf, places - np.searchsorted(gone, places), np.concatenate(what)[order])
    return buf
