"""The Perfetto export of a process joined from its launches' and CTA chunks' exports.

NVIDIA's decoder numbers a trace's tracks 1 (``Root``), 2, 3... in the order it writes their
descriptors, and writes every descriptor before every event. A launch exported alone is
its subtree numbered from 2 under a ``Grid1`` of rank 0; in the whole export launch N's grid
is ``Grid<N>`` (zero-padded to the digits of the last launch) of rank N-1 and its tracks come
after the earlier launches'. So launches join byte for byte: the first part's Root, each
part's descriptors with uuids moved past the tracks before them, then each part's events
moved the same (scripts/pftrace_join_probe.py found it; the tests check it on every fixture).

The chunks of a launch (:mod:`.chunks`) each have their own grid, GPC and TPC tracks, CTAs
counted from 0 and a kernel slice over their own CTAs: joined, the tracks above the CTAs are
one tree (the first chunk to name a GPC or TPC gives it its uuid), the CTAs are renamed from
the chunk's first, and the kernel slice is one, from the first begin to the last end. That is
the whole export's trace (the same events, names, times, tracks and args) but not its bytes:
the tests check this trace identity through Perfetto's own protobuf schema.

Here the join is planned (:class:`Join`: each part's uuid table, the descriptors it leaves
out or renames) and its file written from the parts' moved sections (:meth:`Join.write`); the
moving is done by the workers (:func:`.pftrace_parts.move`).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ....model import pftrace as P
from ....system.filesystem import copy_range
from ...tasks import DEFLATED, MOVED, pftrace_beside
from . import gzip_parts

ROOT = 1
SLICE_BEGIN, SLICE_END = 1, 2
#: Keys of what a part's worker keeps beside it (its "sidecar", :func:`.pftrace_parts.spool`).
EVENTS, TRACKS, SHARED = "events", "tracks", "shared"
CTA_PREFIX = "CTA("


@dataclass
class Unit:
    """One part as the join sees it: its spool, where its events begin, and its move job
    (None: its bytes are the whole trace's as they are) with the worker's answer."""

    spool: Path
    events: int
    job: dict | None
    answer: dict | None = None

    def sections(self) -> tuple[Path, list[int]]:
        """The file its descriptors and events are in, and their sizes."""
        if self.job is None:
            return self.spool, [self.events, self.spool.stat().st_size - self.events]
        return Path(self.job["out"]), self.answer["sizes"]


@dataclass
class _Open:
    """The launch being planned: its number, whether by chunks, the plan before it (to go
    back to when its chunks do not join), and its chunks' shared tracks and kernel slices."""

    number: int
    chunked: bool
    before: tuple[int, bool]
    at: dict = field(default_factory=lambda: {(): ROOT})  # a shared track's path -> its uuid
    slices: list = field(default_factory=list)
    grid: tuple[str, ...] | None = None  # the grid's path


class Join:
    """The plan of one process's Perfetto export joined from its parts, launch by launch and
    part by part (:meth:`start`, :meth:`add` as each part is exported, :meth:`end`), so that
    each part is moved as soon as it and the parts before it are exported."""

    def __init__(self, launches: int, *, pftrace: bool, gz: bool) -> None:
        self.width = len(str(launches))
        self.pftrace, self.gz = pftrace, gz
        self.next = ROOT + 1  # the next track's uuid in the whole trace
        self.launches: list[list[Unit]] = []
        self.rooted = False  # whether a part's root descriptor is already kept
        self.kernels: list[bytes] = []  # per launch, packets written before its parts' events
        self.discarded: list[Unit] = []  # parts of launches whose chunks did not join
        self._open: _Open | None = None

    def launch(self, number: int, spools: list[Path], firsts: list[int]) -> list[dict]:
        """Plan launch ``number`` from all its parts' spools at once; its move jobs."""
        self.start(number, len(spools))
        jobs = [job for spool, first in zip(spools, firsts, strict=True) if (job := self.add(spool, first))]
        self.end()
        return jobs

    def start(self, number: int, parts: int) -> None:
        """Plan launch ``number`` next, exported in ``parts`` parts (more than one: its CTA chunks)."""
        self._open = _Open(number, parts > 1, (self.next, self.rooted))
        self.launches.append([])

    def add(
        self, spool: Path, first: int = 0, described: dict | None = None, *, held: bool = False
    ) -> dict | None:
        """Plan the launch's next part (its spool; a chunk's first CTA): its move job, or
        None when its bytes are the whole trace's as they are. ``described``: what its worker
        said of it (else read from its sidecar); ``held``: the worker keeps it in memory (not
        spooled). Raises ValueError when the chunks do not join (the launch is then
        forgotten: :meth:`drop`)."""
        info = described if described is not None else json.loads(_sidecar(spool).read_text())
        try:
            table, drop, rename, silent = self._chunk(info, first) if self._open.chunked else self._one(info)
            grid = next(uuid for uuid, parent, _ in info[TRACKS] if parent == ROOT)
        except (ValueError, KeyError, StopIteration) as error:
            self.drop()
            raise ValueError(f"its parts do not join ({error})") from None
        number = self._open.number
        rename[str(grid)] = [f"Grid{number + 1:0{self.width}d}", number]
        same = all(table[uuid] == uuid for uuid, _, _ in info[TRACKS])
        job = None
        if held or self.gz or drop or silent or not same or _renames(info, rename):
            job = {
                "kind": "move",
                "spool": str(spool),
                "held": held,
                "found": "" if held else str(pftrace_beside(spool)[1]),
                "events": info[EVENTS],
                "table": table,
                "drop": sorted(drop),
                "silent": sorted(silent),
                "rename": rename,
                "out": str(spool.with_suffix("." + MOVED)) if self.pftrace else "",
                "deflated": str(spool.with_suffix("." + DEFLATED)) if self.gz else "",
            }
        self.launches[-1].append(Unit(spool, info[EVENTS], job))
        return job

    def end(self) -> None:
        """The launch's parts are all planned: its chunks' kernel slices made one."""
        opened = self._open
        try:
            self.kernels.append(_one_slice(opened.slices, opened.at[opened.grid]) if opened.chunked else b"")
        except (ValueError, KeyError) as error:
            self.drop()
            raise ValueError(f"its parts do not join ({error})") from None
        self._open = None

    def drop(self) -> None:
        """Forget the launch being planned, as if never tried; the parts already planned are
        kept aside (:attr:`discarded`) for their files to be removed."""
        self.next, self.rooted = self._open.before
        self.discarded += self.launches.pop()
        self._open = None

    def _root(self) -> set[int]:
        """The root's descriptor left out (a set of its uuid) but by the first part."""
        first, self.rooted = not self.rooted, True
        return set() if first else {ROOT}

    def _one(self, info: dict) -> tuple[list[int], set[int], dict, set[int]]:
        """A launch exported alone: its tracks after those before it, in its order."""
        tracks = info[TRACKS]
        table = [0] * (max(uuid for uuid, _, _ in tracks) + 1)
        drop: set[int] = set()
        for uuid, _, _ in tracks:
            if uuid == ROOT:
                table[uuid], drop = ROOT, self._root()
                continue
            table[uuid], self.next = self.next, self.next + 1
        return table, drop, {}, set()

    def _chunk(self, info: dict, first: int) -> tuple[list[int], set[int], dict, set[int]]:
        """A CTA chunk of a launch: one tree above the CTAs (a shared track's uuid given by
        the first chunk that has it), its CTAs renamed, its kernel slice kept for :meth:`end`
        (its own events on the grid left out: ``silent``)."""
        opened, tracks = self._open, info[TRACKS]
        shared = shared_tracks(tracks)
        paths = _paths(tracks, shared)  # the grid is one of them
        grid = next(uuid for uuid, parent, _ in tracks if parent == ROOT)
        table = [0] * (max(uuid for uuid, _, _ in tracks) + 1)
        drop: set[int] = set()
        rename: dict[str, list] = {}
        for uuid, parent, name in tracks:
            if uuid in shared and paths[uuid] in opened.at:  # the root, or one an earlier chunk has
                table[uuid] = opened.at[paths[uuid]]
                drop |= self._root() if uuid == ROOT else {uuid}
                continue
            table[uuid], self.next = self.next, self.next + 1
            if uuid in shared:
                opened.at[paths[uuid]] = table[uuid]
            elif name.startswith(CTA_PREFIX) and parent in shared:
                rename[str(uuid)] = [_cta(name, first), None]
        opened.slices.append(_kernel_slice(info[SHARED], grid))
        opened.grid = opened.grid or paths[grid]
        return table, drop, rename, {grid}

    def answered(self, job: dict, answer: dict) -> None:
        """A worker's answer to one of the move jobs planned."""
        for units in self.launches:
            for unit in units:
                if unit.job is job:
                    unit.answer = answer

    def write(self, pftrace: Path | None, gz: Path | None) -> None:
        """The joined trace to ``pftrace`` and its gzip'd copy to ``gz`` (either may be None)."""
        units = [unit for launch in self.launches for unit in launch]
        if pftrace is not None:
            with open(pftrace, "wb") as out:
                for unit in units:
                    path, sizes = unit.sections()
                    _copy(path, out, 0, sizes[0])
                for launch, kernel in zip(self.launches, self.kernels, strict=True):
                    out.write(kernel)
                    for unit in launch:
                        path, sizes = unit.sections()
                        _copy(path, out, sizes[0], sizes[1])
        if gz is not None:
            self._write_gz(gz)

    def _write_gz(self, gz: Path) -> None:
        """The deflated sections in the same order, one gzip member."""
        checks: list[tuple[int, int]] = []
        with open(gz, "wb") as out:
            out.write(gzip_parts.HEADER)
            for unit in (unit for launch in self.launches for unit in launch):
                self._copy_deflated(unit, 0, out, checks)
            for launch, kernel in zip(self.launches, self.kernels, strict=True):
                if kernel:
                    out.write(gzip_parts.deflated(kernel))
                    checks.append((zlib.crc32(kernel), len(kernel)))
                for unit in launch:
                    self._copy_deflated(unit, 1, out, checks)
            out.write(gzip_parts.trailer(checks))

    @staticmethod
    def _copy_deflated(unit: Unit, section: int, out, checks: list) -> None:
        pieces = unit.answer["deflated"]
        offset = sum(piece[0] for piece in pieces[:section])
        size, crc, raw = pieces[section]
        _copy(Path(unit.job["deflated"]), out, offset, size)
        checks.append((crc, raw))

    def leftovers(self) -> list[Path]:
        """The files the parts' jobs wrote (those of discarded parts too)."""
        units = [unit for launch in self.launches for unit in launch] + self.discarded
        return [
            Path(name)
            for unit in units
            if unit.job
            for name in (unit.job["out"], unit.job["deflated"])
            if name
        ]


def _sidecar(spool: Path) -> Path:
    return pftrace_beside(spool)[0]


def _renames(info: dict, rename: dict) -> bool:
    """Whether ``rename`` changes a name of the part."""
    names = {str(uuid): name for uuid, _, name in info[TRACKS]}
    return any(names.get(uuid) != new[0] for uuid, new in rename.items())


def _paths(tracks: list[list], which: set[int]) -> dict[int, tuple[str, ...]]:
    """The names from the root down of the tracks ``which`` (the root's path is empty)."""
    parent = {uuid: up for uuid, up, _ in tracks}
    name = {uuid: text for uuid, _, text in tracks}
    paths: dict[int, tuple[str, ...]] = {}
    for uuid in which:
        path, at = [], uuid
        while at in parent and parent[at] and len(path) <= len(parent):
            path.append(name[at])
            at = parent[at]
        paths[uuid] = tuple(reversed(path))
    return paths


def _cta(name: str, first: int) -> str:
    """``CTA(x, y, z)`` of a chunk as its launch numbers it (the chunk's CTAs count from 0)."""
    try:
        x, y, z = (int(part) for part in name[4:-1].split(","))
    except ValueError:
        raise ValueError(f"a CTA track named {name!r}") from None
    return f"CTA({x + first}, {y}, {z})"


def _kernel_slice(packets: list[str], grid: int) -> list[tuple[int, int, bytes]]:
    """A chunk's events above its CTAs as (type, timestamp, packet): only its kernel slice
    on its grid (a begin, then an end) is expected; anything else raises ValueError."""
    out = []
    for text in packets:
        packet = bytes.fromhex(text)
        fields = {number: value for number, _, value in P.fields(packet)}
        event = {number: value for number, _, value in P.fields(fields.get(P.PACKET_TRACK_EVENT, b""))}
        if event.get(P.EVENT_TRACK_UUID) != grid:
            raise ValueError("events on a GPC or TPC track: the chunks do not join")
        out.append((event.get(P.EVENT_TYPE), fields.get(P.PACKET_TIMESTAMP, 0), packet))
    if [kind for kind, _, _ in out] != [SLICE_BEGIN, SLICE_END]:
        raise ValueError("a chunk's grid has events other than its kernel slice")
    return out


def _one_slice(chunks: list[list[tuple[int, int, bytes]]], grid: int) -> bytes:
    """The launch's kernel slice: the earliest begin and the latest end of its chunks', on
    the joined grid."""
    names = {_name(packet) for chunk in chunks for _, _, packet in chunk}
    if len(names) != 1:
        raise ValueError("the chunks' kernel slices differ in name")
    begin = min((chunk[0] for chunk in chunks), key=lambda event: event[1])[2]
    end = max((chunk[1] for chunk in chunks), key=lambda event: event[1])[2]
    moved = {P.EVENT_TRACK_UUID: grid}
    return b"".join(
        P.encode(
            [(P.TRACE_PACKET, 2, P.rewrite(packet, {P.PACKET_TRACK_EVENT: lambda e: P.rewrite(e, moved)}))]
        )
        for packet in (begin, end)
    )


def _name(packet: bytes) -> bytes:
    event = next((v for n, _, v in P.fields(packet) if n == P.PACKET_TRACK_EVENT), b"")
    return next((v for n, _, v in P.fields(event) if n == P.EVENT_NAME), b"")


def _copy(path: Path, out, offset: int, size: int) -> None:
    with open(path, "rb") as source:
        copy_range(source, out, offset, size)


def shared_tracks(tracks: list[list]) -> set[int]:
    """The tracks of a chunk that other chunks of its launch have too: those with no CTA
    at or above them (the root, the grid, its GPCs and TPCs)."""
    parent = {uuid: up for uuid, up, _ in tracks}
    name = {uuid: text for uuid, _, text in tracks}
    shared = set()
    for uuid in parent:
        at, seen = uuid, 0
        while at in parent and not name[at].startswith(CTA_PREFIX) and seen <= len(parent):
            at, seen = parent[at], seen + 1
        if at not in parent:
            shared.add(uuid)
    return shared
