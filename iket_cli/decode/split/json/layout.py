"""The layout of the decoder's JSON export, as far as a split export's merge relies on it.

The decoder writes ``{"graphLaunches":...,"launches":[`` then each launch, then ``],`` and
the tables (``locationTable``, ``meta``, ``stringTable``), keys sorted and no spaces: a part's
launches are the bytes between, and its tables are parsed on their own. A part (or a chunk's
spool) is read or rewritten in place through one mapping of its file (:func:`mapped`).
"""

from __future__ import annotations

import json
import mmap
import os

_LAUNCHES = b'"launches":['
_TABLES = b'],"locationTable":'


def tables_text(tail: dict, strings: list, locations: list) -> bytes:
    """What follows the last launch, as the decoder writes it: ``],`` then the tables (and
    whatever else ``tail`` holds, ``meta``), keys sorted, no spaces."""
    rest = {key: value for key, value in tail.items() if key not in ("locationTable", "stringTable")}
    tables = {"locationTable": locations, **rest, "stringTable": strings}
    text = json.dumps(dict(sorted(tables.items())), separators=(",", ":"), ensure_ascii=False)
    return b"]," + text[1:].encode("utf-8")


def bounds(data) -> tuple[int, int, dict]:
    """(first byte of the launches, the byte after them, the parsed tables) of a part."""
    start = data.find(_LAUNCHES) + len(_LAUNCHES)
    end = data.rfind(_TABLES)
    if start < len(_LAUNCHES) or end < start:
        raise ValueError("a part of the JSON export is not in the decoder's layout")
    return start, end, json.loads(b"{" + data[end + 2 :])


#: How much of a part's start holds ``"launches":[``, and the first look at its end for the tables.
_HEAD, _TAIL = 1 << 12, 1 << 20


def file_bounds(handle) -> tuple[int, int, dict]:
    """:func:`bounds` of an open part file, reading only its start and its tables: the
    merge of a part whose indices need no rewrite never maps the part's pages."""
    size = os.fstat(handle.fileno()).st_size
    handle.seek(0)
    head = handle.read(_HEAD)
    start = head.find(_LAUNCHES) + len(_LAUNCHES)
    window = _TAIL
    while True:
        at = max(size - window, 0)
        handle.seek(at)
        tail = handle.read(size - at)
        end = tail.rfind(_TABLES)
        if end >= 0 or at == 0:
            break
        window *= 8
    if start < len(_LAUNCHES) or end < 0 or at + end < start:
        raise ValueError("a part of the JSON export is not in the decoder's layout")
    return start, at + end, json.loads(b"{" + tail[end + 2 :])


def mapped(handle, *, write: bool = False) -> mmap.mmap:
    """The whole file mapped, its pages mapped at once where Linux allows (MAP_POPULATE):
    a part or a chunk's spool is in the page cache, just written; touching its pages one by
    one costs more."""
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if write else 0)
    return mmap.mmap(handle.fileno(), 0, flags=flags, prot=prot)


def cut(data, base: int, end: int, keys: list[bytes], floors: list[int]) -> tuple:
    """A launch (``data[base:end]``) cut at its arrays, each array's ``key`` (with its ``[``)
    looked for from ``floors`` (offsets from ``base`` it lies after): (its fields up to the
    first array's ``[``, the bytes from each array's ``]`` to the next one's ``[``, each
    array's region from ``base``, the bytes from the last array's ``]``). ValueError where
    the launch is not in that layout."""
    spans, at = [], base
    for key, floor in zip(keys, floors, strict=True):
        found = data.find(key, max(at, base + floor), end)
        if found < 0:
            raise ValueError(f"a chunk without {key.decode()}")
        at = found + len(key)
        spans.append(at)
    ends = []
    for number, begin in enumerate(spans):
        last = number + 1 == len(spans)
        close = data.rfind(b"]}" if last else b"],", begin, end if last else spans[number + 1])
        if close < 0:
            raise ValueError("a chunk's array without its end")
        ends.append(close)
    betweens = [data[ends[n] : spans[n + 1]] for n in range(len(spans) - 1)]
    regions = [(spans[n] - base, ends[n] - base) for n in range(len(spans))]
    return data[base : spans[0]], betweens, regions, data[ends[-1] : end]
