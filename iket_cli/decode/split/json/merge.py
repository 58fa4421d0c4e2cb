"""The JSON export, split by launch and merged back byte for byte.

The decoder's JSON export grows faster than the capture (its memory most of all: a whole
export peaks at about twice a launch's alone), and one process's launches decode on one core
each only if they are decoded apart. A raw capture manifest that keeps one launch decodes on
its own, so each decodable launch is exported by a worker of its own and the results merged.
The parts differ only in their tables: each has its own ``stringTable`` and
``locationTable``, and the whole export's tables are those of the first part followed by
each later part's new entries, in the order they appear. Merging therefore appends new
table entries and rewrites the four index fields of the later parts' launches
(``rangeNameIdx``, ``markerNameIdx``, ``locIdx``, ``warpLocIdxs``: :mod:`.indices`);
everything else is copied as bytes, by the kernel.

The work is placed where it costs least: a part's worker writes its spool and finds its
indices while the other launches decode (:func:`spool`); the first part's spool becomes the
output (renamed, not copied); each later part is rewritten in its own pages and copied onto
the output by ``copy_file_range`` (:class:`Merger`), so little of the merge is left after the
last decode (docs/history/benchmarks.md, "The rest of the decode, and the report, beside the decodes").
A big launch is itself decoded in chunks of CTAs and stitched first (:mod:`.chunks`,
:mod:`.stitch`): :func:`part_manifests` writes their manifests too. :func:`export_json` is
the sequential form, for small captures decoded in the CLI's own process.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ....system.filesystem import copy_range, write_slices
from ...tasks import indices_name, spool_name
from ..launches import part_manifests
from . import indices
from .layout import bounds, file_bounds, mapped, tables_text


def spool(decoder, path: Path, *, find_indices: bool) -> None:
    """Export one part with ``decoder`` (closed once exported) and write it to ``path``; with
    ``find_indices`` (a part after the first, whose indices the merge rewrites, or a CTA
    chunk, which the stitch renumbers) also find them and keep them beside it, so neither
    scans the part again
    (:mod:`.indices`). The text is encoded a slice at a time and dropped before the
    indices are found in the file's pages: no second copy of the part is held."""
    try:
        text = decoder.export_decoded_json()
    finally:
        decoder.close()
    with open(path, "w", encoding="utf-8") as handle:
        write_slices(handle, text)
    del text
    if find_indices:
        with open(path, "rb") as handle, mapped(handle, write=False) as data:
            start, end, _ = bounds(data)
            found = indices.find(memoryview(data)[start:end])
        indices.save(found, path.with_name(indices_name(path.name)))


def export_json(raw: Path, out: Path, decoder_class) -> bool:
    """Write the whole JSON export of ``raw`` to ``out`` by launches; False if unsplittable.

    Parts are decoded one after another (each launch alone is much cheaper than its share
    of the whole export) and spooled to temporary files, so at most one part is in memory.
    """
    launches = part_manifests(raw)
    if launches is None:
        return False
    parts = [launch.path for launch in launches]
    spooled = [part.with_name(spool_name(part.name)) for part in parts]
    try:
        for part, spooled_at in zip(parts, spooled, strict=True):
            spool(decoder_class(str(part)), spooled_at, find_indices=False)
        merge(spooled, out)
    finally:
        for path in [*parts, *spooled]:
            path.unlink(missing_ok=True)
    return True


def merge(parts: list[Path], out: Path) -> None:
    """Write the whole export, built from single-launch exports (in launch order), to ``out``.
    The parts' spools are consumed: the first becomes ``out``."""
    with Merger(out) as merger:
        for path in parts:
            merger.add(path)
        merger.finish()


class Merger:
    """The merge, one part at a time in launch order: a part is written as soon as it and
    the parts before it are exported, while later launches are still being decoded.

    The first part's spool becomes the output (renamed, its tables cut off: its launches
    are the whole export's first bytes, unchanged); each later part's indices are rewritten
    in its own spool's pages (:func:`.indices.rewrite`) and the kernel copies its
    launches onto the output (``copy_file_range``), so no part passes through Python's
    memory unless a number changes its length."""

    def __init__(self, out: Path) -> None:
        self.path = out
        self.handle = None
        #: (ranges, markers) of the parts so far, from the indices kept beside them; None
        #: once a part came without (the trace's readers then count them in the file).
        self.counts: tuple[int, int] | None = (0, 0)
        #: Each part's (names, locations): where its table entries sit in the whole's.
        self.maps: list[tuple[list[int], list[int]]] = []
        self.strings: list = []
        self.locations: list = []
        self.string_at: dict = {}
        self.location_at: dict = {}
        self.tail: dict = {}

    def __enter__(self) -> Merger:
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()

    def add(self, path: Path, counts: tuple[int, int] | None = None) -> None:
        """Append the launches of the spooled part at ``path`` (and its indices, if kept);
        ``counts``: its (ranges, markers), when they are known (a stitched launch's)."""
        if self.handle is None:
            self.counts = _added(self.counts, self._adopt(path, counts))
            return
        kept = path.with_name(indices_name(path.name))
        found = self._append(path, indices.load(kept) if kept.is_file() else None)
        self.counts = _added(self.counts, found.counts() if found is not None else None)

    def write_launch(self, tables: dict, write) -> None:
        """Append a launch written by ``write(handle, names, locs)`` straight into the output
        (a launch stitched from its CTA chunks: no spool of its own to copy), its tables
        merged as a part's are; ``write`` returns its (ranges, markers)."""
        self.tail = tables
        names, locs = self._maps()
        self.handle.write(b",")
        self.counts = _added(self.counts, write(self.handle, names, locs))

    def _append(self, path: Path, found: indices.Indices | None) -> indices.Indices | None:
        """A later part: its launches after a comma, their indices rewritten (by ``found``,
        returned; None when they do not fit the part and were found again)."""
        with open(path, "r+b") as source:
            start, end, self.tail = file_bounds(source)
            if found is not None and len(found) and int(found.end.max()) > end - start:
                found = None  # not this part's: find them again
            names, locs = self._maps()
            self.handle.write(b",")
            if indices.unchanged(names) and indices.unchanged(locs):
                copy_range(source, self.handle, start, end - start)  # the same tables: as it is
                return found
            with mapped(source, write=True) as data:
                if _rewritten(data, start, end, names, locs, found):
                    copy_range(source, self.handle, start, end - start)
                else:  # a number changed its length: the rewritten bytes pass through here
                    self.handle.write(indices.remapped(memoryview(data)[start:end], names, locs, found))
        return found

    def _adopt(self, path: Path, counts: tuple[int, int] | None) -> tuple[int, int]:
        """The first part: its spool, renamed into place, is the output up to its tables;
        its (ranges, markers): ``counts``, or from the indices kept beside it, or counted in
        its pages."""
        kept = path.with_name(indices_name(path.name))
        with open(path, "rb") as source:
            start, tables_at, self.tail = file_bounds(source)
            if counts is None and kept.is_file():
                counts = indices.load(kept).counts()
            elif counts is None:
                with mapped(source, write=False) as data:
                    counts = indices.count(memoryview(data)[start:tables_at])
        self._maps()  # the whole export's tables start with the first part's, in order
        try:
            os.replace(path, self.path)
        except OSError:  # another file system: copy it
            shutil.copyfile(path, self.path)
        self.handle = open(self.path, "r+b")  # noqa: SIM115 - closed by __exit__
        self.handle.truncate(tables_at)
        self.handle.seek(tables_at)
        return counts

    def _maps(self) -> tuple[list[int], list[int]]:
        """Where this part's table entries sit in the whole export's tables (new ones
        appended); kept in :attr:`maps`."""
        names = [_index(self.string_at, self.strings, s, s) for s in self.tail["stringTable"]]
        locs = [
            _index(self.location_at, self.locations, _key(loc), loc) for loc in self.tail["locationTable"]
        ]
        self.maps.append((names, locs))
        return names, locs

    def finish(self) -> None:
        self.handle.write(tables_text(self.tail, self.strings, self.locations))
        self.handle.close()
        self.handle = None


def _rewritten(data, start: int, end: int, names: list[int], locs: list[int], found) -> bool:
    """Rewrite the part's indices in its own pages; False (nothing written) when a number
    would change its length."""
    import numpy as np

    body = np.frombuffer(data, np.uint8, count=end - start, offset=start)
    try:
        return indices.rewrite(body, names, locs, found)
    finally:
        del body  # the mapping closes only once no array points into it


def _added(counts: tuple[int, int] | None, more: tuple[int, int] | None) -> tuple[int, int] | None:
    """``counts`` plus a part's (ranges, markers); None when either is unknown."""
    if counts is None or more is None:
        return None
    return counts[0] + more[0], counts[1] + more[1]


def _key(location: dict) -> str:
    return json.dumps(location, sort_keys=True)


def _index(index: dict, table: list, key, value) -> int:
    if key not in index:
        index[key] = len(table)
        table.append(value)
    return index[key]
