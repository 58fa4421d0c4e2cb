"""The bytes of a stitched launch, renumbered and written where they belong.

:class:`.stitch.Stitch` plans a launch stitched from its CTA chunks: where each run of a
chunk's records lands in the output (its length after renumbering is known beforehand, from
the digits of each index's new number) and the plan cut into jobs of about equal bytes. A
job is plain data (:func:`write` takes it in a long-lived worker, ``worker --serve``, or in
this process): the chunks' spools it reads, their maps into the output's tables, and its
runs, each written at its offset (``pwritev``). So the launch's bytes are copied and
renumbered by several processes side by side, and the stitch that ends a decode no longer
waits on one core (docs/history/benchmarks.md, "The stitch written by the workers, and smaller chunks").
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NamedTuple

from ...tasks import indices_name
from . import indices
from .layout import mapped


class Array(NamedTuple):
    """One of a launch's record arrays, as the stitch reads it."""

    key: bytes  #: the array's key and ``[``
    record: bytes  #: how each of its records begins
    warp: int  #: the index key that gives a record's warp (a range's: its first warpLocIdxs)
    one_each: int  #: an index key each record has once (to count records)
    names_warp: bytes  #: the bytes that name a record's warp, when they name it alone


ARRAYS = (
    Array(b'"markers":[', b'{"color":', indices.LOC, indices.LOC, b'"locIdx":%(w)d,'),
    Array(b'"ranges":[', b'{"endTs":', indices.WARP_LOC, indices.RANGE_NAME, b'"warpLocIdxs":[%(w)d,%(w)d]'),
    Array(b'"warpLifetimes":[', b'{"endTs":', indices.LOC, indices.LOC, b'"locIdx":%(w)d,'),
)


def jobs(out: str, sources: list[dict], groups: list, parts: int) -> list[dict]:
    """``groups`` cut into at most ``parts`` jobs of about equal bytes, each naming only the
    chunks it reads. ``sources``: each chunk's :class:`Source` arguments; a group: [chunk,
    array (in :data:`ARRAYS`), offset in ``out``, bytes once renumbered, whether a comma goes
    first, its warps' runs ([first byte, end, the warp's location index in the chunk])]."""
    total = sum(group[3] for group in groups)
    cut: list[list] = [[]]
    done = 0
    for group in groups:
        if cut[-1] and done >= total * len(cut) / parts and len(cut) < parts:
            cut.append([])
        cut[-1].append(group)
        done += group[3]
    return [_job(out, sources, mine) for mine in cut if mine]


def _job(out: str, sources: list[dict], groups: list) -> dict:
    """One job: its groups, their chunks renumbered among the sources it names."""
    used = sorted({group[0] for group in groups})
    number = {chunk: index for index, chunk in enumerate(used)}
    return {
        "kind": "stitch",
        "out": out,
        "sources": [sources[chunk] for chunk in used],
        "groups": [[number[group[0]], *group[1:]] for group in groups],
    }


def here(jobs: list[dict]) -> None:
    """A plan's jobs written by this process, one after another."""
    for job in jobs:
        write(job)


#: Buffers a ``pwritev`` call takes at most (Linux's IOV_MAX).
_IOV_MAX = 1024


def write(job: dict) -> None:
    """Write a job of :meth:`.stitch.Stitch.plan`: each of its groups of runs renumbered
    and written at its offset of ``job["out"]``. Raises OSError (a full disk) or ValueError
    (a run whose bytes are not the length planned: the output is not to be trusted)."""
    sources = [Source(**spec) for spec in job["sources"]]
    fd = os.open(job["out"], os.O_WRONLY)
    try:
        for source_no, array_no, offset, size, comma, warps in job["groups"]:
            pieces = sources[source_no].renumbered(warps, ARRAYS[array_no])
            buffers = [b","] if comma else []
            for piece in pieces:
                buffers += [piece, b","]
            buffers.pop()
            if sum(len(one) for one in buffers) != size:
                raise ValueError(
                    f"a stitched run of {sources[source_no].path.name} is not its planned length"
                )
            _pwrite_all(fd, buffers, offset)
    finally:
        os.close(fd)
        for source in sources:
            source.close()


def chunk_indices(spool: Path, body) -> indices.Indices:
    """A chunk's indices, in byte order: those its worker kept beside its spool, or found in
    ``body`` (its launch's bytes)."""
    kept = spool.with_name(indices_name(spool.name))
    return indices.load(kept) if kept.is_file() else indices.find(body)


def _pwrite_all(fd: int, buffers: list, offset: int) -> None:
    """All of ``buffers`` at ``offset``, one after another (``pwritev``, IOV_MAX at a time)."""
    while buffers:
        now, buffers = buffers[:_IOV_MAX], buffers[_IOV_MAX:]
        done = os.pwritev(fd, now, offset)
        size = sum(len(one) for one in now)
        if done < size:  # a short write (a disk filling up): the rest one by one, or OSError
            rest = b"".join(now)[done:]
            while rest:
                written = os.pwrite(fd, rest, offset + done)
                if written <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                rest, done = rest[written:], done + written
        offset += size


class Source:
    """A chunk's spooled export as a job reads it: its launch's bytes (mapped from ``start``),
    its indices (kept beside it), and its maps into the output's tables (``names``,
    ``locs``: where each entry of the chunk's own tables sits there)."""

    def __init__(self, spool: str, start: int, end: int, names: list[int], locs: list[int]) -> None:
        self.path = Path(spool)
        self.start, self.names, self.locs = start, names, locs
        with open(self.path, "rb") as handle:
            self.data = mapped(handle)
        self.found = chunk_indices(self.path, memoryview(self.data)[start:end])

    def close(self) -> None:
        self.data.close()

    def renumbered(self, warps: list, array: Array) -> list:
        """Runs of the chunk's body (``warps``: [first byte, end, the warp's location index]
        each, one warp's records side by side) with their indices renumbered: its pieces, to
        be written with a comma between.

        Names that move keep their number of digits as a rule (a string table is short):
        they are stored over the old digits in a copy of the runs. Then a warp's records
        that all name that warp alone (every marker and lifetime; ranges that end in the
        warp they began in) are renumbered by one ``bytes.replace`` (C speed); any other
        run has its digits spliced by numpy."""
        import numpy as np

        source, base = self.data, self.start
        if not indices.unchanged(self.names):
            low, high = warps[0][0], warps[-1][1]
            source, base = self._names_renumbered(low, high), -low
            if source is None:  # a name's number grows a digit
                return [self._spliced(low, high)]
        pieces = []
        for first, last, old in warps:
            piece = source[base + first : base + last]
            now = self.locs[old]
            if old != now:
                lo, hi = np.searchsorted(self.found.start, [first, last])
                records = int(np.count_nonzero(self.found.key[lo:hi] == array.one_each))
                before, after = (array.names_warp % {b"w": warp} for warp in (old, now))
                if piece.count(before) == records:
                    piece = piece.replace(before, after)
                else:  # a range that ends in another warp: its digits one by one
                    piece = self._spliced(first, last)
            pieces.append(piece)
        return pieces

    def _names_renumbered(self, low: int, high: int) -> bytearray | None:
        """Bytes ``low``..``high`` of the body, copied, with their name indices renumbered over
        their own digits; None when one would change its length."""
        import numpy as np

        found = self._within(low, high)
        found = found.taken(found.key <= indices.MARKER_NAME)
        new = np.asarray(self.names, np.int64)[found.value]
        moved = new != found.value
        start, length, new = found.start[moved], (found.end - found.start)[moved], new[moved]
        if (indices.digit_counts(new) != length).any():
            return None
        out = bytearray(self.data[self.start + low : self.start + high])
        indices.overwrite(np.frombuffer(out, np.uint8), start, length, new)
        return out

    def _spliced(self, low: int, high: int) -> bytes:
        """Bytes ``low``..``high`` of the body with every index number in them renumbered
        (:func:`.indices.spliced`)."""
        import numpy as np

        found = self._within(low, high)
        new = indices.looked_up(found, self.names, self.locs)
        body = np.frombuffer(self.data, np.uint8, count=high - low, offset=self.start + low)
        out, _ = indices.spliced(body, found, new)
        del body
        return out.tobytes()

    def _within(self, low: int, high: int) -> indices.Indices:
        """The indices in bytes ``low``..``high``, their positions counted from ``low``."""
        import numpy as np

        lo, hi = np.searchsorted(self.found.start, [low, high])
        found = self.found.taken(slice(lo, hi))
        found.start, found.end = found.start - low, found.end - low
        return found
