"""One gzip member from pieces deflated apart, side by side.

A ``.pftrace.gz`` of a few hundred MB takes one core seconds to deflate. Deflated pieces,
each ended by a sync flush (an empty stored block: byte-aligned, not final), concatenate into
one valid deflate stream; the member's CRC-32 is combined from the pieces' own
(:func:`crc32_combine`, zlib's method), so the process that joins them never reads the data
again. One member, not several: a browser's ``DecompressionStream`` reads only the first.
"""

from __future__ import annotations

import zlib
from pathlib import Path

#: gzip's level here (run-iket's is 9: the same size, ten times the time).
LEVEL = 6
#: A gzip header with no name and a zero mtime (reproducible), as ``gzip.compress(mtime=0)``.
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
#: An empty final block: ends the deflate stream.
FINAL = b"\x03\x00"


def deflated(data: bytes) -> bytes:
    """``data`` as a piece of a deflate stream (raw, sync-flushed, not final)."""
    engine = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    return engine.compress(data) + engine.flush(zlib.Z_SYNC_FLUSH)


def deflate_to(path: Path, sections: list[bytes]) -> list[list[int]]:
    """Each section deflated (:func:`deflated`), one after another into ``path``; per
    section [deflated bytes, crc32, bytes]."""
    out = []
    with open(path, "wb") as handle:
        for data in sections:
            piece = deflated(data)
            handle.write(piece)
            out.append([len(piece), zlib.crc32(data), len(data)])
    return out


def trailer(pieces: list[tuple[int, int]]) -> bytes:
    """The end of a member made of ``pieces`` ((crc32, bytes) each, in order)."""
    crc, size = 0, 0
    for piece_crc, piece_size in pieces:
        crc = crc32_combine(crc, piece_crc, piece_size)
        size += piece_size
    return FINAL + crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")


def crc32_combine(first: int, second: int, second_size: int) -> int:
    """The CRC-32 of A + B from those of A and B and the length of B (zlib's crc32_combine:
    A's CRC shifted through ``second_size`` zero bytes by squaring a GF(2) operator)."""
    if second_size <= 0:
        return first
    odd = [0xEDB88320] + [1 << n for n in range(31)]  # the operator for one zero bit
    even = _square(odd)  # two zero bits
    odd = _square(even)  # four zero bits
    while True:
        even = _square(odd)  # one zero byte the first time round, then 4, 16...
        if second_size & 1:
            first = _times(even, first)
        second_size >>= 1
        if not second_size:
            break
        odd = _square(even)
        if second_size & 1:
            first = _times(odd, first)
        second_size >>= 1
        if not second_size:
            break
    return first ^ second


def _times(matrix: list[int], vector: int) -> int:
    out, row = 0, 0
    while vector:
        if vector & 1:
            out ^= matrix[row]
        vector >>= 1
        row += 1
    return out


def _square(matrix: list[int]) -> list[int]:
    return [_times(matrix, matrix[n]) for n in range(32)]
