"""A launch's CTA chunks, their exports stitched back into the launch's own export.

The decoder orders a launch's warps by (SM, CTA, warp): its location table in that order,
and the records of each array (markers, ranges, warp lifetimes) grouped by warp in that order
(a range by the warp it began in). A chunk's export (:mod:`.chunks`) is that order
restricted to its CTAs, so the launch's export interleaves the chunks' per-warp runs of
records by (SM, CTA, warp), their location indices renumbered into the launch's table and
their name indices into the launch's string table (names in the order the decoder first meets
them: warp by warp). :class:`Stitch` reads the chunks and checks them with the indices each
chunk's worker found (:mod:`.indices`); anything that does not fit this layout raises
``ValueError`` and the launch is decoded whole instead. Its plan places every run of records
in the output, its length once renumbered known from the digits of each index's new number,
and :mod:`.stitch_jobs` copies the runs and renumbers only the digits, in several workers side
by side. Byte for byte the decoder's whole-launch export (tested on every capture in
``tests/fixtures``, PyTorch's many-CTAs-an-SM kernels among them, and on the GPU by
``scripts/gpu_check.py``). Its cost: docs/history/benchmarks.md, "The stitch written by the workers,
and smaller chunks".
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from . import indices, stitch_jobs
from .layout import bounds, cut, mapped, tables_text
from .stitch_jobs import ARRAYS, Array


def _order(location: dict) -> tuple:
    return (
        location["smId"],
        location["ctaId"][2],
        location["ctaId"][1],
        location["ctaId"][0],
        location["warpId"],
    )


class _Chunk:
    """A chunk's spooled export: its launch's bytes (mapped), tables and indices."""

    def __init__(self, path: Path, first: int) -> None:
        self.path = path
        self.handle = open(path, "rb")  # noqa: SIM115 - closed by close()
        try:
            self.data = mapped(self.handle)
        except (OSError, ValueError):
            self.handle.close()
            raise
        try:
            self._read(path, first)
        except (KeyError, TypeError, IndexError) as error:
            self.close()
            raise ValueError(f"{path.name}: not the decoder's layout ({error!r})") from None
        except BaseException:
            self.close()
            raise

    def _read(self, path: Path, first: int) -> None:
        self.start, self.end, tail = bounds(self.data)
        self.tail = tail
        self.strings = tail["stringTable"]
        self.locations = [
            dict(loc, ctaId=[loc["ctaId"][0] + first, *loc["ctaId"][1:]]) for loc in tail["locationTable"]
        ]
        keys = [_order(loc) for loc in self.locations]
        if keys != sorted(keys) or len(set(keys)) != len(keys):
            raise ValueError(f"{path.name}: its warps are not in (SM, CTA, warp) order")
        self.found = stitch_jobs.chunk_indices(path, self.body())

    def body(self) -> memoryview:
        return memoryview(self.data)[self.start : self.end]

    def close(self) -> None:
        self.data.close()
        self.handle.close()


class Stitch:
    """A launch's chunks (their spools, in CTA order, each chunk's indices kept beside its
    spool or found again), read and checked: the launch's tables, and each array's runs of
    records in the launch's order. Everything that may not fit the layout raises
    ``ValueError`` here, before a byte is written; then :meth:`write_file` writes the
    launch's own export, or :meth:`write_into` its launch into a merge's output."""

    def __init__(self, spools: list[Path], firsts: list[int], grid_x: int) -> None:
        self.chunks: list[_Chunk] = []
        try:
            for path, first in zip(spools, firsts, strict=True):
                self.chunks.append(_Chunk(path, first))
            counted = [one.found.counts() for one in self.chunks]
            #: The launch's (ranges, markers): its chunks' together.
            self.counts = (sum(r for r, _ in counted), sum(m for _, m in counted))
            self._tables()
            self.layouts = [_layout(one) for one in self.chunks]
            head = self.layouts[0][0]
            if any(_gridless(other[0]) != _gridless(head) for other in self.layouts):
                raise ValueError("the chunks' launch fields differ")
            self.head = _GRID.sub(b'"gridDimX":%d,' % grid_x, head, count=1)
            self.runs = [
                self._runs([layout[2][number] for layout in self.layouts], array)
                for number, array in enumerate(ARRAYS)
            ]
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Stitch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for one in self.chunks:
            one.close()
        self.chunks = []

    @property
    def tables(self) -> dict:
        """The launch's tables (and the rest of the export's tail, ``meta``)."""
        return {**self.chunks[0].tail, "locationTable": self.locations, "stringTable": self.strings}

    @property
    def maps(self) -> list[tuple[list[int], list[int]]]:
        """Each chunk's (names, locations) map into the launch's tables."""
        return list(zip(self.name_maps, self.loc_maps, strict=True))

    def _tables(self) -> None:
        """The launch's location table (its warps in (SM, CTA, warp) order) and string table,
        and each chunk's maps into them."""
        chunks = self.chunks
        everything = sorted(
            (_order(loc), number, index)
            for number, one in enumerate(chunks)
            for index, loc in enumerate(one.locations)
        )
        if len({key for key, _, _ in everything}) != len(everything):
            raise ValueError("two chunks hold the same warp")
        self.locations = [chunks[number].locations[index] for _, number, index in everything]
        self.loc_maps = [[0] * len(one.locations) for one in chunks]
        #: Each chunk's warps by their launch rank: rank -> the chunk's own location index.
        self.local: list[dict[int, int]] = [{} for _ in chunks]
        for rank, (_, number, index) in enumerate(everything):
            self.loc_maps[number][index] = rank
            self.local[number][rank] = index
        self.strings, self.name_maps = self._names()

    def _names(self) -> tuple[list, list[list[int]]]:
        """The launch's string table, and each chunk's map into it: each name where the
        decoder first meets it, warp by warp, and within a warp in its chunk's own order.
        Chunks do differ (CuTe DSL's ``cute_affine``: a warp meets ``load`` before ``affine``
        in some CTAs), and this order gives the whole launch's table on that capture at 2, 3
        and 7 chunks (``tests/decode/split/test_chunks.py``)."""
        tables = [one.strings for one in self.chunks]
        if all(table == tables[0] for table in tables):
            strings = list(tables[0])
        else:
            first: dict = {}
            for number, one in enumerate(self.chunks):
                for index, (rank, name) in enumerate(zip(self._first_use(number), one.strings, strict=True)):
                    first[name] = min(first.get(name, (rank, index)), (rank, index))
            strings = sorted(first, key=first.__getitem__)
        at = {name: index for index, name in enumerate(strings)}
        return strings, [[at[name] for name in table] for table in tables]

    def _first_use(self, number: int) -> list[int]:
        """The launch rank of the first warp using each of chunk ``number``'s names (a
        range's name: the warp it began in; a marker's: its own)."""
        import numpy as np

        found, ranks = self.chunks[number].found, np.asarray(self.loc_maps[number] + [1 << 40], np.int64)
        key = found.key
        names = np.flatnonzero((key == indices.RANGE_NAME) | (key == indices.MARKER_NAME))
        warp_at = np.where(key[names] == indices.RANGE_NAME, names + 1, names - 1)  # see ARRAYS
        warp_at = np.clip(warp_at, 0, max(len(key) - 1, 0))
        rank = (
            ranks[np.clip(found.value[warp_at], 0, len(ranks) - 1)] if len(names) else np.zeros(0, np.int64)
        )
        first = np.full(len(self.chunks[number].strings), 1 << 40, np.int64)
        np.minimum.at(first, np.clip(found.value[names], 0, len(first) - 1), rank)
        return first.tolist()

    def write_file(self, out: Path, run=None, parts: int = 1) -> tuple[int, int]:
        """Write the launch's one-launch export to ``out``; its (ranges, markers). ``run``,
        ``parts``: how its runs are written (:meth:`write_into`)."""
        with open(out, "wb") as handle:
            handle.write(self.chunks[0].data[: self.chunks[0].start])
            self.write_into(handle, run=run, parts=parts)
            handle.write(tables_text(self.chunks[0].tail, self.strings, self.locations))
        return self.counts

    def write_into(
        self, handle, names: list[int] | None = None, locs: list[int] | None = None, run=None, parts: int = 1
    ):
        """Write the launch (its ``{...}``) at the position of ``handle`` (a file opened for
        writing), its indices renumbered into the launch's tables, or through them into a
        whole export's (``names``, ``locs``: where each entry of the launch's tables sits
        there); its (ranges, markers). ``run(jobs)`` writes the plan's ``parts`` jobs, side by
        side in workers say (default: here, one after another); ``handle`` is left at the
        launch's end."""
        handle.flush()
        plan = self.plan(Path(handle.name), handle.tell(), names, locs, parts)
        for offset, fixed in plan.fixed:
            os.pwrite(handle.fileno(), fixed, offset)
        (run or stitch_jobs.here)(plan.jobs)
        handle.seek(plan.end)
        return self.counts

    def plan(
        self, out: Path, base: int, names: list[int] | None, locs: list[int] | None, parts: int = 1
    ) -> Plan:
        """Where every byte of the launch lands in ``out`` from ``base``: the launch's own
        fields and the arrays' ends (written by the caller), and each array's runs renumbered
        (:func:`.stitch_jobs.write`), in ``parts`` jobs of about equal bytes. Each run's length
        after renumbering comes from its indices: each number's new digits."""
        final_names = [_through(table, names) for table in self.name_maps]
        final_locs = [_through(table, locs) for table in self.loc_maps]
        growth = [
            self._growth(number, final_names[number], final_locs[number])
            for number in range(len(self.chunks))
        ]
        lengths = [
            [self._lengths(chunk_no, growth[chunk_no], warps) for chunk_no, warps in self.runs[number]]
            for number in range(len(ARRAYS))
        ]
        limit = max(1, sum(int(one.sum()) for array in lengths for one in array) // (4 * parts))
        _, betweens, _, tail = self.layouts[0]
        fixed, groups, at = [(base, self.head)], [], base + len(self.head)
        for number in range(len(ARRAYS)):
            if number:  # from one array's ] to the next one's [
                fixed.append((at, betweens[number - 1]))
                at += len(betweens[number - 1])
            for run, ((chunk_no, warps), sizes) in enumerate(
                zip(self.runs[number], lengths[number], strict=True)
            ):
                local = self.local[chunk_no]
                for begin, end in _cuts(sizes, limit):  # groups small enough to share out
                    comma = bool(run or begin)
                    size = int(sizes[begin:end].sum()) + end - begin - 1 + comma
                    runs = [[first, last, local[rank]] for rank, first, last in warps[begin:end]]
                    groups.append([chunk_no, number, at, size, comma, runs])
                    at += size
        fixed.append((at, tail))
        sources = [
            {
                "spool": str(one.path),
                "start": one.start,
                "end": one.end,
                "names": final_names[n],
                "locs": final_locs[n],
            }
            for n, one in enumerate(self.chunks)
        ]
        return Plan(fixed, stitch_jobs.jobs(str(out), sources, groups, parts), at + len(tail))

    def _growth(self, number: int, names: list[int], locs: list[int]):
        """The bytes chunk ``number``'s indices gain (or lose) when renumbered by ``names``
        and ``locs``, summed from its first index: element k is that of indices 0..k-1."""
        import numpy as np

        found = self.chunks[number].found
        delta = indices.digit_counts(indices.looked_up(found, names, locs)) - (found.end - found.start)
        return np.concatenate([[0], np.cumsum(delta)])

    def _lengths(self, number: int, growth, warps: list):
        """The bytes of each of chunk ``number``'s warp runs once renumbered."""
        import numpy as np

        spans = np.asarray([(first, last) for _, first, last in warps], np.int64)
        lo, hi = (np.searchsorted(self.chunks[number].found.start, spans[:, side]) for side in (0, 1))
        return spans[:, 1] - spans[:, 0] + growth[hi] - growth[lo]

    def _runs(self, regions: list, array: Array) -> list[tuple[int, list]]:
        """The array's runs of records in the launch's warp order: (chunk, its warps' runs
        (rank, first byte, end)), a chunk's neighbouring runs together."""
        runs = []
        for number, (low, high) in enumerate(regions):
            for rank, first, last in self._warp_runs(number, low, high, array):
                runs.append((rank, number, first, last))
        runs.sort()
        joined: list[tuple[int, list]] = []
        for rank, number, first, last in runs:
            if joined and joined[-1][0] == number and joined[-1][1][-1][2] + 1 == first:
                joined[-1][1].append((rank, first, last))
            else:
                joined.append((number, [(rank, first, last)]))
        return joined

    def _warp_runs(self, number: int, low: int, high: int, array: Array) -> list:
        """(launch rank of the warp, first byte, end) of each run of one warp's records in
        the array held by ``low``..``high`` of chunk ``number``'s body."""
        import numpy as np

        one = self.chunks[number]
        if high <= low:
            return []
        found = one.found
        lo, hi = np.searchsorted(found.start, [low, high])
        key = found.key[lo:hi]
        if array.warp == indices.WARP_LOC:  # a range's warp: the entry after its name
            names = np.flatnonzero(key == indices.RANGE_NAME)
            if len(names) and (names[-1] + 1 >= len(key) or (key[names + 1] != indices.WARP_LOC).any()):
                raise ValueError("a range without its warp")
            at = names + 1
        else:
            at = np.flatnonzero(key == array.warp)
        ranks = np.asarray(self.loc_maps[number], np.int64)[found.value[lo:hi][at]]
        if (np.diff(ranks) < 0).any():
            raise ValueError("a chunk's records are not grouped by warp in (SM, CTA, warp) order")
        change = np.flatnonzero(np.diff(ranks)) + 1
        positions = found.start[lo:hi][at]
        body, runs, begin = one.data, [], low
        base = one.start
        for index in change.tolist():
            cut = body.rfind(b"}," + array.record, base + begin, base + int(positions[index]))
            if cut < 0:
                raise ValueError("a record the layout does not explain")
            cut -= base
            runs.append((int(ranks[index - 1]), begin, cut + 1))
            begin = cut + 2
        if len(ranks):
            runs.append((int(ranks[-1]), begin, high))
        elif high > low:
            raise ValueError("records without a warp")
        return runs


class Plan(NamedTuple):
    """A launch's bytes placed in its output (:meth:`Stitch.plan`)."""

    fixed: list[tuple[int, bytes]]  #: (offset, bytes) the caller writes: fields, arrays' ends
    jobs: list[dict]  #: the runs, for :func:`.stitch_jobs.write`
    end: int  #: the offset after the launch


def _cuts(sizes, limit: int) -> list[tuple[int, int]]:
    """Neighbouring warp runs (their ``sizes``) cut where they pass ``limit`` bytes."""
    cuts, begin, held = [], 0, 0
    for at, size in enumerate(sizes.tolist()):
        held += size
        if held >= limit:
            cuts.append((begin, at + 1))
            begin, held = at + 1, 0
    if begin < len(sizes):
        cuts.append((begin, len(sizes)))
    return cuts


def _through(table: list[int], then: list[int] | None) -> list[int]:
    """``table`` looked up in ``then`` (None: as it is)."""
    return table if then is None else [then[index] for index in table]


_GRID = re.compile(rb'"gridDimX":\d+,')


def _gridless(head: bytes) -> bytes:
    return _GRID.sub(b"", head, count=1)


#: The index keys only the records of each array but the last hold: the next array's key
#: comes after the last of them.
_OWN_KEYS = ((indices.MARKER_NAME,), (indices.RANGE_NAME, indices.WARP_LOC))


def _after(found: indices.Indices, keys: tuple[int, ...]) -> int:
    """The end of the last index of ``keys`` in a body (0: none)."""
    import numpy as np

    held = np.flatnonzero(np.logical_or.reduce([found.key == key for key in keys]))
    return int(found.end[held[-1]]) if len(held) else 0


def _layout(one: _Chunk) -> tuple[bytes, list[bytes], list[tuple[int, int]], bytes]:
    """A chunk's launch cut at its arrays (:func:`.layout.cut`), each array's key looked for
    after the records of the one before (a chunk is megabytes)."""
    floors = [0] + [_after(one.found, keys) for keys in _OWN_KEYS]
    return cut(one.data, one.start, one.end, [array.key for array in ARRAYS], floors)
