"""A capture as the reading commands see it, opened once: :func:`open_capture` finds its JSON
traces (a capture directory, its manifest or one trace file), reads the manifest and what lies
beside each trace, and keeps the filters of ``--kernel``, ``--range``, ``--launch``, ``--cta``
and ``--warp``. The traces themselves are loaded only when a reader asks (:meth:`Opened.traces`),
one at a time, so that ``iket lint`` of a large capture never holds two of them.

``show``, ``lint``, ``diff``, ``report``, ``export`` and ``sql`` take an :class:`Opened`, not
a path: a new reading command opens the capture the same way and needs no loop of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import trace as trace_mod
from .folder import Beside, beside, find_traces, manifest_of
from .trace import KINDS, Trace


@dataclass(frozen=True)
class Found:
    """One JSON trace of a capture: its label (``rank 1 (pid 0x2b5)``), its path, and what its
    capture folder says of it."""

    label: str
    path: Path
    beside: Beside


@dataclass(frozen=True)
class Opened:
    """A capture opened for reading: where it is, its manifest (None for a bare trace file),
    its traces found (not yet loaded) and the filters every reader applies."""

    location: Path
    manifest: dict[str, Any] | None
    found: tuple[Found, ...]
    filters: dict[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        """The folder that holds the capture (a trace file's own folder)."""
        return self.location if self.location.is_dir() else self.location.parent

    @property
    def filtered(self) -> dict[str, Any]:
        """The filters given a value (those left None filter nothing)."""
        return {name: value for name, value in self.filters.items() if value is not None}

    def traces(self, kinds: tuple[str, ...] = KINDS) -> Iterator[tuple[Found, Trace]]:
        """Each trace loaded in turn (``kinds``: the record kinds to read), filtered."""
        for found in self.found:
            yield found, self.select(trace_mod.load(found.path, kinds))

    def unfiltered(self, kinds: tuple[str, ...] = KINDS) -> Iterator[tuple[Found, Trace]]:
        """Each trace loaded in turn, whole: for readers that apply the filters themselves
        (the summary names a filter that matched nothing)."""
        for found in self.found:
            yield found, trace_mod.load(found.path, kinds)

    def select(self, trace: Trace) -> Trace:
        """``trace`` with the filters applied (itself where none is given)."""
        return trace_mod.select(trace, **self.filtered) if self.filtered else trace


def open_capture(location: str | os.PathLike, **filters: Any) -> Opened:
    """Open a capture directory, its ``manifest.json`` or one ``*.trace.json`` for reading.
    ``filters``: those of :func:`iket_cli.model.trace.select`. Raises
    :class:`~iket_cli.errors.ManifestError` where there is no trace to read."""
    path = Path(location)
    record = manifest_of(path)
    read = {path if path.is_dir() else path.parent: record} if record is not None else {}
    found = tuple(Found(label, trace, beside(trace, read)) for label, trace in find_traces(path))
    return Opened(path, record, found, dict(filters))
