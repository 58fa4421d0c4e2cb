"""One gzip member from pieces deflated apart, and the CRC-32 combined from theirs."""

from __future__ import annotations

import gzip
import os
import zlib

from iket_cli.decode.split.perfetto import gzip_parts


def test_crc32_combine_is_the_crc_of_the_concatenation():
    pieces = [b"", b"a", os.urandom(1000), b"xyz" * 40_000, os.urandom(7)]
    for first in pieces:
        for second in pieces:
            combined = gzip_parts.crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second))
            assert combined == zlib.crc32(first + second)


def test_pieces_deflated_apart_are_one_member_any_reader_opens(tmp_path):
    pieces = [os.urandom(5000), b"track " * 10_000, b"", b"event" * 3]
    path = tmp_path / "parts.bin"
    said = gzip_parts.deflate_to(path, pieces)
    member = (
        gzip_parts.HEADER + path.read_bytes() + gzip_parts.trailer([(crc, size) for _, crc, size in said])
    )
    assert gzip.decompress(member) == b"".join(pieces)
    assert zlib.decompressobj(wbits=31).decompress(member) == b"".join(pieces), "one member"
    assert member[:10] == gzip.compress(b"", compresslevel=gzip_parts.LEVEL, mtime=0)[:10], "reproducible"
