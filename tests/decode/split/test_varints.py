"""Varints read, counted and rewritten side by side, against the one-at-a-time codec."""

from __future__ import annotations

import numpy as np

from iket_cli.decode.split import varints as V
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
