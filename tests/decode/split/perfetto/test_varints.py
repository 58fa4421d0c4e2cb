"""Varints read, counted and rewritten side by side, against the one-at-a-time codec."""

from __future__ import annotations

import numpy as np

from iket_cli.decode.split.perfetto import varints as V
from iket_cli.model import pftrace as P


def test_widths_values_and_digits_match_the_codec():
    numbers = [0, 1, 127, 128, 300, 16383, 16384, (1 << 21) - 1, 1 << 21, (1 << 28) + 5, (1 << 35) - 1]
    encoded = [P.encode_varint(n) for n in numbers]
    a = V.padded(b"".join(encoded))
    at = np.cumsum([0] + [len(e) for e in encoded[:-1]])
    widths = V.widths(a, at)
    assert widths.tolist() == [len(e) for e in encoded]
    assert V.values(a, at, widths).tolist() == numbers
    assert V.digits(np.asarray(numbers)).tolist() == [len(e) for e in encoded]


def test_edited_rewrites_inserts_and_deletes_varints_and_cuts_ranges():
    old = [5, 300, 70000, 9]
    encoded = [P.encode_varint(n) for n in old]
    buf = V.padded(b"".join(encoded) + b"tail")[: sum(map(len, encoded)) + 4].copy()
    at = np.cumsum([0] + [len(e) for e in encoded[:-1]])
    new = np.asarray([1 << 20, 2, 70001, 9])
    out = V.edited(buf, at, np.asarray([len(e) for e in encoded]), new, [(len(buf) - 2, len(buf))])
    assert out.tobytes() == b"".join(P.encode_varint(int(n)) for n in new) + b"ta"


def test_field_finds_a_key_among_fields_of_every_wire_type():
    message = P.encode([(1, 0, 300), (2, 2, b"x" * 200), (3, 0, 1), (9, 0, 42)])
    a = V.padded(message)
    found = V.field(a, np.asarray([0]), np.asarray([len(message)]), 9 << 3)
    assert found.tolist() == [len(message) - 2]
    assert V.field(a, np.asarray([0]), np.asarray([len(message)]), 7 << 3).tolist() == [-1]


def _spliced(numbers: list[int], new: list[int], gaps: list[bytes], cut: list[bool]) -> tuple:
    """A buffer of varints with a gap of bytes after each, the same rewritten one at a time
    (the gaps marked in ``cut`` left out), and where the varints and the cut gaps are."""
    before, after, at, cuts = b"", b"", [], []
    for number, value, gap, gone in zip(numbers, new, gaps, cut, strict=True):
        at.append(len(before))
        before += P.encode_varint(number)
        after += P.encode_varint(value)
        if gone:
            cuts.append((len(before), len(before) + len(gap)))
        else:
            after += gap
        before += gap
    return before, after, np.asarray(at, np.int64), cuts


def test_edited_matches_the_codec_on_many_varints_that_grow_shrink_or_keep_their_width():
    rng = np.random.default_rng(7)
    for count in (1, 50, 9000):  # 9000: more cut ranges than are cut by slicing
        numbers = rng.integers(0, 1 << 21, count).tolist()
        new = [
            int(n) if k % 3 == 0 else int(v)
            for k, (n, v) in enumerate(zip(numbers, rng.integers(0, 1 << 28, count).tolist(), strict=True))
        ]
        gaps = [bytes(rng.integers(0, 256, int(rng.integers(0, 4)), dtype=np.uint8)) for _ in range(count)]
        cut = (rng.random(count) < 0.8).tolist()
        before, after, at, cuts = _spliced(numbers, new, gaps, cut)
        old = np.asarray([len(P.encode_varint(n)) for n in numbers])
        buf = np.frombuffer(before, np.uint8).copy()
        out = V.edited(buf, at, old, np.asarray(new, np.int64), cuts)
        assert out.tobytes() == after, count
