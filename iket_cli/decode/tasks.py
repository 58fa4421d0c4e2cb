"""What there is to decode: one task per (process, export), checked before a decoder sees it.

Each process's raw capture gives at most two tasks: the JSON export, and the Perfetto
export (which also feeds the report's gzip'd copy). The raw files are checked first: the
C++ decoder aborts its whole process on a truncated ``iket.data.bin``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..model import jsonio
from ..model.vocab import (
    FORMATS,
    JSON_EXPORT,
    JSON_PER_RAW_BYTE,
    PERFETTO_PER_RAW_BYTE,
    RAW_DATA,
    RAW_DIR,
    RAW_MANIFEST,
    artifact_name,
    exports_for,
    raw_pid,
)

#: Up to this many raw bytes a capture is decoded in a fork of the CLI (the decoder already
#: imported there), above in worker processes, its exports split by launch: a fresh
#: interpreter costs more than it saves.
INLINE_BYTES = 4 << 20

if TYPE_CHECKING:
    from ..model.trace import Trace

#: Peak memory of a task as a multiple of its raw ``iket.data.bin``: the JSON export is held
#: once by the decoder and once as a Python string (measured: docs/history/benchmarks.md, "Figures
#: behind the constants").
MEMORY_FACTOR = {"json": 60, "perfetto": 65}
#: A worker process's own memory besides its decode: the interpreter, numpy, the decoder's
#: library, a move's arrays (docs/history/benchmarks.md, "The Perfetto export split").
WORKER_BYTES = 64 << 20
#: A part of a Perfetto export kept in its worker's memory for its move, as a multiple of
#: its raw bytes: the export (6x) and its event packets found (docs/history/benchmarks.md, "Figures
#: behind the constants").
HELD_FACTOR = 12


@dataclass(frozen=True)
class Task:
    """One export of one process's raw capture: ``json``, or ``perfetto`` (+ its gzip'd copy)."""

    pid_hex: str
    raw: Path
    out_dir: Path
    export: str
    formats: tuple[str, ...]
    #: One launch of a JSON export split by launches (:mod:`.split.launches`): (k, n), launch k
    #: of n; ``raw`` is then that launch's part manifest and the output its spool file.
    part: tuple[int, int] | None = None
    #: One chunk of that launch split by CTAs (:mod:`.split.chunks`): (c, m), chunk c of m;
    #: ``raw`` is then the chunk's manifest and the output its spool file.
    chunk: tuple[int, int] | None = None

    @property
    def which_launch(self) -> str:
        """`` launch 1 of 2`` for a part of a split JSON export (`` launch 1 of 2, CTAs 3/4``
        for a chunk of one), else empty (for messages)."""
        if not self.part:
            return ""
        where = f" launch {self.part[0] + 1} of {self.part[1]}"
        return where + (f", CTA chunk {self.chunk[0] + 1}/{self.chunk[1]}" if self.chunk else "")

    @property
    def raw_bytes(self) -> int:
        try:
            return (self.raw.parent / RAW_DATA).stat().st_size
        except OSError:
            return 0

    @property
    def output_bytes(self) -> int:
        """About how much disk this task needs at its peak: its artifact, and for an export
        split by launch (over :data:`INLINE_BYTES`) the spooled parts beside the joined file."""
        per_raw = JSON_PER_RAW_BYTE if self.export == JSON_EXPORT else PERFETTO_PER_RAW_BYTE
        return self.raw_bytes * per_raw * (2 if self.raw_bytes > INLINE_BYTES else 1)

    @property
    def memory(self) -> int:
        """The bytes this task may take at its peak (an estimate, see MEMORY_FACTOR); a
        part's, its share of the raw data (a process's launches weigh about the same)."""
        whole = self.raw_bytes * MEMORY_FACTOR[self.export]
        return whole // (self.part[1] if self.part else 1) // (self.chunk[1] if self.chunk else 1)

    def most_at_once(self, units: int) -> int:
        """How many of this task's ``units`` parts may run at once so that together they
        take no more memory than the task exported whole (each is its share of the task and
        a worker of its own, :data:`WORKER_BYTES`), two at least (two halves side by side)."""
        share = self.memory // max(units, 1) + WORKER_BYTES
        return max(2, (self.memory + WORKER_BYTES) // share)

    def may_hold(self, units: int, at_once: int) -> bool:
        """Whether, ``at_once`` of this task's ``units`` parts running side by side
        (:meth:`most_at_once`), every part may also be kept in memory for its move and all
        still take no more than the task exported whole (on two CPUs, yes; on sixteen, a
        part is kept only while the join waits for it, :meth:`.schedule.Batch.keeps`)."""
        share = self.memory // max(units, 1)
        held = self.raw_bytes * HELD_FACTOR
        return at_once * (share + WORKER_BYTES) + held <= self.memory + WORKER_BYTES

    def parts(self, count: int) -> list[Task]:
        """This task's launches as tasks of their own (their part manifests written by
        :meth:`.split.launches.Plan.write` beside the raw manifest)."""
        folder, name = self.raw.parent, self.raw.name
        return [
            Task(self.pid_hex, folder / part_name(name, k, None, self.export), folder, self.export,
                 self.formats, (k, count))
            for k in range(count)
        ]  # fmt: skip

    def units(self, chunks: list[int]) -> list[list[Task]]:
        """What this task runs as, split by launches (``chunks``: the CTA chunks of each
        launch, 1 for a launch decoded whole): per launch, its part, or its chunks as tasks
        of their own (their manifests written by :meth:`.split.launches.Plan.write`)."""
        folder, launches = self.raw.parent, len(chunks)
        return [
            [part]
            if count < 2
            else [
                Task(self.pid_hex, folder / part_name(self.raw.name, number, c, self.export), folder,
                     self.export, self.formats, part.part, (c, count))
                for c in range(count)
            ]
            for number, (part, count) in enumerate(zip(self.parts(launches), chunks, strict=True))
        ]  # fmt: skip

    def to_dict(self) -> dict:
        """The task as JSON data, for a worker process (see :func:`from_dict`)."""
        return {
            "pid_hex": self.pid_hex,
            "raw": str(self.raw),
            "out_dir": str(self.out_dir),
            "export": self.export,
            "formats": list(self.formats),
            "part": list(self.part) if self.part else None,
            "chunk": list(self.chunk) if self.chunk else None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Task:
        part, chunk = data.get("part"), data.get("chunk")
        return cls(
            data["pid_hex"],
            Path(data["raw"]),
            Path(data["out_dir"]),
            data["export"],
            tuple(data["formats"]),
            (int(part[0]), int(part[1])) if part else None,
            (int(chunk[0]), int(chunk[1])) if chunk else None,
        )

    def outputs(self) -> list[str]:
        """The artifact names this task writes (a part: its spool file beside the raw data)."""
        if self.part:
            return [spool_name(self.raw.name)]
        if self.export == JSON_EXPORT:
            return [artifact_name(self.pid_hex, "trace_json")]
        names = [artifact_name(self.pid_hex, "perfetto")] if "perfetto" in self.formats else []
        return names + ([artifact_name(self.pid_hex, "pftrace_gz")] if "html" in self.formats else [])


@dataclass
class Outcome:
    """How one task ended."""

    task: Task
    seconds: float
    error: str | None = None
    written: list[str] = field(default_factory=list)
    #: The task was stopped by an interrupt, not by a problem of its own.
    cancelled: bool = False
    #: ``errno`` of the write that failed (ENOSPC, EDQUOT: a full disk), where one did.
    errno: int | None = None
    #: What a split export says beyond its files (:class:`Joined`), or a part of one kept in
    #: its worker's memory for its move (:class:`Kept`).
    split: Joined | Kept | None = None

    @property
    def kept(self) -> Kept | None:
        """The part this outcome's worker keeps in memory for its move, if it does."""
        kept = self.split
        return kept if isinstance(kept, Kept) and kept.holder is not None else None


@dataclass
class Joined:
    """A split export's file, joined from its parts: what the join learnt of it on the way,
    so that nothing reads the file again for it."""

    #: A JSON export's record counts (ranges, markers), for the manifest.
    counts: tuple[int, int] | None = None
    #: ...and, with html asked for, its trace assembled from the columns its workers
    #: scanned, for the lint and the report (see :func:`take_traces`).
    trace: Trace | None = None
    #: A Perfetto export's parts and what it shares with the decoder's whole export
    #: (``bytes``: split by launches only; ``trace``: by CTA chunks too).
    joined: dict | None = None


@dataclass(frozen=True)
class Kept:
    """A part of a split Perfetto export exported by a long-lived worker: what the join needs
    to plan it, and the worker that keeps it in memory for its move (a
    :class:`.workers.Server`, which alone can move it), or None once it is spooled to files."""

    described: dict
    holder: object = None


class Progress:
    """What the pool (:func:`.pool.run`) reports while it decodes. The default says nothing."""

    def planned(self, units: list[Task]) -> None:
        """The decodes about to run: whole tasks, and the launches of split JSON exports."""

    def started(self, task: Task) -> None:
        """A task began."""

    def finished(self, outcome: Outcome) -> None:
        """A task ended, well or not."""


def known_counts(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
    """The record counts the decode already knows, by the name of the file it wrote."""
    joined = [(o.written[0], j) for o in outcomes if (j := _joined(o)) and o.written]
    return {name: j.counts for name, j in joined if j.counts is not None}


def known_joins(outcomes: list[Outcome]) -> dict[str, dict]:
    """How the decode joined the artifacts it wrote from parts, by file name."""
    return {name: j.joined for o in outcomes if (j := _joined(o)) and j.joined for name in o.written}


def _joined(outcome: Outcome) -> Joined | None:
    return outcome.split if isinstance(outcome.split, Joined) else None


#: At most this many assembled traces are kept in memory (see :func:`drop_traces`).
MOST_TRACES = 2


def drop_traces(outcomes: list[Outcome], most: int = MOST_TRACES) -> None:
    """Free the assembled traces of all but the last ``most`` outcomes holding one: the
    reports of the others read their files (a capture of many big processes, or of many
    repeats, would otherwise hold every trace at once)."""
    holding = [j for o in outcomes if (j := _joined(o)) and j.trace is not None]
    for joined in holding[: max(len(holding) - most, 0)]:
        joined.trace = None


def held_traces(outcomes: list[Outcome]) -> list[tuple[str, Trace]]:
    """(the name of the file it wrote, the trace) of each outcome still holding the trace
    its decode assembled."""
    joined = [(o.written[0], j) for o in outcomes if (j := _joined(o)) and o.written]
    return [(name, j.trace) for name, j in joined if j.trace is not None]


def take_traces(outcomes: list[Outcome]) -> dict[str, Trace]:
    """The traces the decode assembled, by the name of the file it wrote, taken out of the
    outcomes: whoever takes them decides how long they stay in memory."""
    taken = dict(held_traces(outcomes))
    for outcome in outcomes:
        if (joined := _joined(outcome)) is not None:
            joined.trace = None
    return taken


#: How the files of a split export's parts begin, by export: the two exports of one raw
#: capture are split side by side, so their parts must not share names.
PART_PREFIX = {"json": ".part", "perfetto": ".pfpart"}


def part_name(raw_name: str, number: int, chunk: int | None = None, export: str = JSON_EXPORT) -> str:
    """``.part1.iket.data.json``: the raw manifest that keeps launch ``number`` alone;
    ``.part1.2.iket.data.json``: the one that keeps its CTA chunk ``chunk`` (``.pfpart...``:
    the Perfetto export's)."""
    prefix = PART_PREFIX[export]
    return f"{prefix}{number}.{raw_name}" if chunk is None else f"{prefix}{number}.{chunk}.{raw_name}"


#: What a part of a split export leaves beside the raw data until it is merged: its spooled
#: export, what its worker found in it (a JSON part's table indices, a Perfetto part's
#: tracks), the columns its worker scanned; a Perfetto part's event packets as its worker
#: found them, and its moved and deflated sections.
SPOOL, INDICES, COLUMNS, FOUND, MOVED, DEFLATED = "out", "idx", "cols", "fnd", "mv", "mvz"


def spool_name(part: str) -> str:
    """``.part1.iket.data.out``: where a part's JSON export is spooled before the merge."""
    return _beside(part, SPOOL)


def indices_name(spool: str) -> str:
    """``.part1.iket.data.idx``: where what a part's worker found in it is kept for the merge."""
    return _beside(spool, INDICES)


def found_name(spool: str) -> str:
    """``.pfpart1.iket.data.fnd``: where a Perfetto part's worker keeps the event packets it
    found in the part (:func:`.split.pftrace_parts.spool`), for the part's move."""
    return _beside(spool, FOUND)


def pftrace_beside(spooled: Path) -> tuple[Path, Path]:
    """What a Perfetto part's worker keeps beside its spool: its sidecar (where its events
    begin, its tracks) and the event packets it found (:func:`found_name`)."""
    return spooled.with_name(indices_name(spooled.name)), spooled.with_name(found_name(spooled.name))


def columns_name(spool: str) -> str:
    """``.part1.iket.data.cols``: where a spooled part's scanned columns are kept for the report."""
    return _beside(spool, COLUMNS)


def part_leftovers(raw: Path) -> list[Path]:
    """Everything the parts of ``raw``'s split exports may have left beside it."""
    found = []
    for prefix in PART_PREFIX.values():
        found += raw.parent.glob(f"{prefix}*.{raw.name}")
        for suffix in (SPOOL, INDICES, COLUMNS, FOUND, MOVED, DEFLATED):
            found += raw.parent.glob(f"{prefix}*.{raw.stem}.{suffix}")
    return found


def _beside(name: str, suffix: str) -> str:
    return f"{name.rsplit('.', 1)[0]}.{suffix}"


def find_raw(capture_dir: Path) -> list[tuple[str, Path]]:
    """``(pid_hex, iket.data.json)`` of every process run-iket kept under ``iket/``."""
    root = capture_dir / RAW_DIR
    if not root.is_dir():
        return []
    found = []
    for entry in sorted(os.listdir(root)):
        pid_hex = raw_pid(entry)
        if pid_hex is not None and (root / entry).is_dir():
            found.append((pid_hex, root / entry / RAW_MANIFEST))
    return found


def plan(capture_dir: Path, formats: list[str]) -> list[Task]:
    """The tasks that produce ``formats`` for every kept process, largest first."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise UsageError(f"unknown format {unknown[0]!r}", hint=f"use {', '.join(FORMATS)} or all")
    exports = exports_for(formats)
    tasks = [
        Task(pid_hex, raw, capture_dir, export, tuple(formats))
        for pid_hex, raw in find_raw(capture_dir)
        for export in exports
    ]
    return sorted(tasks, key=lambda t: -t.memory)


def missing_input(task: Task, manifest: dict | None = None) -> str | None:
    """Why the raw capture cannot be decoded, checked cheaply before the decoder sees it.

    The C++ decoder aborts the whole process on a truncated ``iket.data.bin``, so the
    raw manifest's data references are checked against the files first. ``manifest``: the
    raw manifest as already read (the launch plan's), else it is read here.
    """
    for path in (task.raw, task.raw.parent / RAW_DATA):
        if not path.is_file():
            return f"{path} is missing"
    try:
        data = manifest if manifest is not None else jsonio.read(task.raw)
        launches = data["launches"]
        refs = [(launch.get("canDecode"), launch.get("dataRef") or {}) for launch in launches]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        return f"{task.raw} is not a raw capture manifest ({error.__class__.__name__})"
    sizes: dict[str, int] = {}
    for number, (decodable, ref) in enumerate(refs):
        if not decodable or not isinstance(ref, dict) or not ref.get("filename"):
            continue
        data = task.raw.parent / str(ref["filename"])
        if data.name not in sizes:
            sizes[data.name] = data.stat().st_size if data.is_file() else -1
        try:
            end = int(ref.get("offset", 0)) + int(ref.get("size", 0))
        except (TypeError, ValueError):
            return f"{task.raw} is not a raw capture manifest (launch {number} has no numeric dataRef)"
        if sizes[data.name] < 0:
            return f"{data} is missing"
        if end > sizes[data.name]:
            return f"{data} is truncated: launch {number} needs {end} bytes, it has {sizes[data.name]}"
    return None
