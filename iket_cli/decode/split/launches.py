"""The launch plan of a split export: which launches (and CTA chunks) a process's raw capture
is exported by, planned once from the raw manifest read once.

A raw capture manifest that keeps one launch decodes on its own, so each decodable launch
gets a manifest of its own beside the raw one (and a big launch one per chunk of its CTAs,
:mod:`.chunks`). The parts sit in the same folder, so their data references (relative file
names; the decoder aborts on absolute ones) still point at the original ``iket.data.bin``.
Both exports split by this plan: the JSON export (:mod:`.json`) and the Perfetto trace
(:mod:`.perfetto`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...model import jsonio
from ...model.vocab import JSON_EXPORT
from ..tasks import part_name
from . import chunks


@dataclass(frozen=True)
class LaunchPart:
    """One decodable launch of a split export: its own raw manifest and, when it is decoded
    by CTAs (:mod:`.chunks`), its chunks' manifests and its CTAs."""

    path: Path
    chunks: tuple[Path, ...] = ()
    ctas: int = 0

    @property
    def firsts(self) -> list[int]:
        """Each chunk's first CTA."""
        return chunks.firsts(self.ctas, len(self.chunks))


@dataclass(frozen=True)
class Plan:
    """A raw manifest read once: its data (None: unreadable, ``error`` says why) and the CTA
    chunks of each launch it is split into (``chunks``, [] when it is not worth splitting)."""

    raw: Path
    data: dict | None
    chunks: tuple[int, ...] = ()
    error: str | None = None

    @property
    def split(self) -> bool:
        return bool(self.chunks)

    def write(self, export: str = JSON_EXPORT) -> list[LaunchPart] | None:
        """Write one raw manifest per decodable launch beside ``raw`` (and one per chunk of
        CTAs of a launch planned in chunks), named for ``export``'s parts; None if not split."""
        if not self.chunks or self.data is None:
            return None
        data, raw = self.data, self.raw
        parts = []
        for number, (launch, count) in enumerate(zip(_decodable(data), self.chunks, strict=True)):
            path = raw.with_name(part_name(raw.name, number, None, export))
            path.write_text(json.dumps({**data, "launches": [launch]}))
            if count < 2:
                parts.append(LaunchPart(path))
                continue
            ctas = chunks.ctas(launch)
            pieces = []
            for chunk_no, (first, last) in enumerate(chunks.spans(ctas, count)):
                pieces.append(raw.with_name(part_name(raw.name, number, chunk_no, export)))
                pieces[-1].write_text(json.dumps({**data, "launches": [chunks.chunk(launch, first, last)]}))
            parts.append(LaunchPart(path, tuple(pieces), ctas))
        return parts


def plan(raw: Path, chunk_bytes: int | None = None) -> Plan:
    """Read ``raw`` once and plan its launches (with ``chunk_bytes``, a launch whose raw data
    exceeds it in chunks of CTAs)."""
    try:
        data = jsonio.read(raw)  # a regular file alone: a FIFO named so would hold the reader forever
    except OSError as error:
        return Plan(raw, None, error=f"{raw} cannot be read ({error.strerror or error})")
    except ValueError as error:
        return Plan(raw, None, error=f"{raw} is not a raw capture manifest ({error.__class__.__name__})")
    if not isinstance(data, dict):
        return Plan(raw, None, error=f"{raw} is not a raw capture manifest (not an object)")
    try:
        return Plan(raw, data, tuple(_chunk_counts(data, chunk_bytes)))
    except (ValueError, TypeError, AttributeError):
        return Plan(raw, data)


def planned_parts(raw: Path, chunk_bytes: int | None = None) -> list[int]:
    """The chunks of each launch :func:`part_manifests` would write; [] if not split."""
    return list(plan(raw, chunk_bytes).chunks)


def part_manifests(
    raw: Path, chunk_bytes: int | None = None, export: str = JSON_EXPORT
) -> list[LaunchPart] | None:
    """:meth:`Plan.write` of ``raw``'s plan: its parts' manifests written; None if not split."""
    return plan(raw, chunk_bytes).write(export)


def _decodable(data: dict) -> list[dict]:
    return [
        launch for launch in data.get("launches", []) if isinstance(launch, dict) and launch.get("canDecode")
    ]


def _chunk_counts(data: dict, chunk_bytes: int | None) -> list[int]:
    if data.get("graphLaunches"):
        return []
    counts = [chunks.chunk_count(launch, chunk_bytes) if chunk_bytes else 1 for launch in _decodable(data)]
    return counts if len(counts) > 1 or sum(counts) > 1 else []
