"""A capture directory as a reader sees it: its manifest, its processes and their traces.

:class:`Capture` is what :func:`iket_cli.profile` returns and ``Capture.load(DIR)`` opens;
:func:`find_traces` is how ``show``, ``diff``, ``lint`` and ``report`` find the JSON traces
of a directory, a manifest or a single trace file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ManifestError, MultiProcessError, UsageError
from . import completeness, jsonio, labels
from . import manifest as manifest_mod
from .vocab import (
    GEN_CONFIG_DIR,
    INSTRUMENT_CONFIG,
    INSTRUMENTED,
    MANIFEST_NAME,
    WARP_TRACE,
    pid_of,
    raw_manifest,
    trace_glob,
)


@dataclass(frozen=True)
class Process:
    """One captured process and its artifacts (absolute paths; None where not produced)."""

    pid: int
    trace_json: Path | None
    perfetto: Path | None
    html: Path | None
    info: dict[str, Any]

    @property
    def pid_hex(self) -> str:
        return self.info["pid_hex"]


class Capture:
    """A published capture directory and its manifest."""

    def __init__(self, output_dir: Path, manifest: dict[str, Any]) -> None:
        self.output_dir = Path(output_dir)
        self.manifest = manifest

    @classmethod
    def load(cls, location: str | os.PathLike) -> Capture:
        """Open an existing capture directory (or its ``manifest.json``)."""
        path = Path(location)
        folder = path if path.is_dir() else path.parent
        return cls(folder, manifest_mod.read(path))

    @property
    def processes(self) -> list[Process]:
        result = []
        for info in self.manifest["processes"]:
            arts = info["artifacts"]

            def at(kind: str, arts: dict = arts) -> Path | None:
                return self.output_dir / arts[kind]["path"] if kind in arts else None

            result.append(Process(info["pid"], at("trace_json"), at("perfetto"), at("html"), info))
        return result

    @property
    def instrumented(self) -> list[Process]:
        """The processes that launched an instrumented kernel (see manifest.instrumented)."""
        wanted = manifest_mod.instrumented(self.manifest["processes"])
        return [p for p in self.processes if p.info in wanted]

    @property
    def repeats(self) -> list[Capture]:
        """A repeated capture (``--repeat N``): a view of each repeat that was published,
        repeat 1 first (``.manifest["repeat"]`` is its record); ``[self]`` for one capture."""
        done = self.manifest.get("repeats") or []
        if not done:
            return [self]
        views = []
        for repeat in done:
            mine = [p for p in self.manifest["processes"] if p.get("repeat", 1) == repeat["index"]]
            if mine:
                record = {**self.manifest, "processes": mine, "repeat": repeat}
                views.append(type(self)(self.output_dir, record))
        return views

    def _only(self, kind: str) -> Path:
        """The one process's artifact; processes that launched no instrumented kernel
        (a launcher that only initialised CUDA) do not count."""
        if len(self.repeats) > 1:
            raise MultiProcessError(
                f"this capture holds {len(self.repeats)} repeats, so it has no single {kind}",
                hint=f"use capture.repeats[i].{kind} for each repeat",
            )
        processes = self.instrumented
        if len(processes) != 1:
            raise MultiProcessError(
                f"this capture holds {len(processes)} processes, so it has no single {kind}",
                hint=f"use capture.processes[i].{kind} for each process",
            )
        path = getattr(processes[0], kind)
        if path is None:
            raise UsageError(
                f"this capture has no {kind}",
                hint="capture with postprocess='all' (or the format you need)",
            )
        return path

    @property
    def trace_json(self) -> Path:
        return self._only("trace_json")

    @property
    def perfetto(self) -> Path:
        return self._only("perfetto")

    @property
    def html(self) -> Path:
        return self._only("html")

    def __repr__(self) -> str:
        return f"Capture({str(self.output_dir)!r}, status={self.manifest['status']!r})"


def find_traces(location: Path) -> list[tuple[str, Path]]:
    """``(label, trace.json)`` for a capture directory, a manifest or one trace file."""
    location = Path(location)
    if location.is_file() and location.name != MANIFEST_NAME:
        return [(pid_of(location.name), location)]
    folder = location if location.is_dir() else location.parent
    if (folder / MANIFEST_NAME).is_file():
        record = manifest_mod.read(folder)
        found = [
            (process_label(p), folder / p["artifacts"]["trace_json"]["path"])
            for p in manifest_mod.instrumented(record["processes"])
            if "trace_json" in p["artifacts"]
        ]
    elif location.is_dir():
        found = [(pid_of(p.name), p) for p in sorted(folder.glob(trace_glob()))]
    else:
        raise ManifestError(f"{location} does not exist", hint="give a capture directory or a trace")
    if not found:
        raise ManifestError(
            f"{location} holds no JSON trace",
            hint="capture with --postprocess all or json, or run: iket postprocess DIR --format json",
        )
    return found


def process_label(process: dict) -> str:
    """``rank 1 (pid 0x2b5)``; in a merged capture prefixed by its input: ``node-a/0x204``."""
    label = labels.describe(process).removeprefix("pid ")
    label = f"{process['folder']}/{label}" if process.get("folder") else label
    return f"{label} (repeat {process['repeat']})" if process.get("repeat") else label


def manifest_of(location: Path) -> dict[str, Any] | None:
    """The manifest of a capture directory or manifest file; None for a bare trace file."""
    location = Path(location)
    folder = location if location.is_dir() else location.parent
    if (location.is_dir() or location.name == MANIFEST_NAME) and (folder / MANIFEST_NAME).is_file():
        return manifest_mod.read(folder)
    return None


@dataclass(frozen=True)
class Beside:
    """What a capture folder holds about one of its traces, besides the trace."""

    process: dict[str, Any] | None  # the manifest's entry for it (None: no manifest names it)
    recorded_lint: list[dict[str, Any]]  # the lint findings the manifest recorded for it
    raw: Path | None  # its raw capture (``iket/pid_<hex>/iket.data.json``), where kept
    #: ``instrumented`` or ``warp-trace`` (vocab.MODES); None where nothing beside it says
    mode: str | None = None
    #: Its losses as the manifest's completeness record has them (None: no record)
    losses: list[dict[str, Any]] | None = None


def beside(trace: Path, read: dict[Path, dict[str, Any]] | None = None) -> Beside:
    """The manifest entry, recorded findings, raw capture and mode of ``trace`` (a merged
    capture's manifest is one folder up, or two for a repeat of a merged capture). ``read``:
    manifests the caller has already read, by folder (not read again)."""
    trace = Path(trace)
    raw = trace.parent / raw_manifest(pid_of(trace.name))
    raw_found = raw if raw.is_file() else None
    for folder in trace.parents[:3]:
        if read and folder in read:
            record = read[folder]
        elif not (folder / MANIFEST_NAME).is_file():
            continue
        else:
            try:
                record = manifest_mod.read(folder)
            except ManifestError:
                continue
        for process in record.get("processes", []):
            artifact = process.get("artifacts", {}).get("trace_json")
            if artifact and (folder / artifact["path"]).resolve() == trace.resolve():
                pid, repeat = process.get("pid_hex"), process.get("repeat")
                recorded = [
                    f
                    for f in record.get("lint") or []
                    if f.get("process") == pid and f.get("repeat") == repeat
                ]
                losses = completeness.of_process(record, pid)
                return Beside(process, recorded, raw_found, mode_of(record), losses)
    return Beside(None, [], raw_found, configured_mode(trace.parent))


def mode_of(record: dict[str, Any]) -> str:
    """A manifest's mode; one written before iket recorded it says so in run-iket's argv."""
    if record.get("mode") in (INSTRUMENTED, WARP_TRACE):
        return record["mode"]
    return WARP_TRACE if "--warp-trace" in (record.get("run_iket_argv") or []) else INSTRUMENTED


def configured_mode(folder: Path) -> str | None:
    """A kept run-iket folder's mode: its generated config instruments nothing in warp-trace."""

    try:
        config = jsonio.read(folder / GEN_CONFIG_DIR / INSTRUMENT_CONFIG)
    except (OSError, ValueError):
        return None
    modules = config.get("modules") if isinstance(config, dict) else None
    if not isinstance(modules, list):
        return None
    return INSTRUMENTED if modules else WARP_TRACE
