"""The per-process entries of a manifest, read off the files of a capture directory.

Counts are read cheaply: kernels and launches from run-iket's raw capture manifest
(``iket/pid_<hex>/iket.data.json``, a few KB), ranges and markers by counting their keys
in the compact trace JSON (no parse). What the caller already knows of a JSON trace (its
decode counted it as it merged the launches, or an earlier scan in the same run counted it) is
handed in as ``counted`` and not counted again: a count reads the whole trace.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import jsonio
from .names import Namer
from .vocab import (
    ARTIFACT_STEM,
    ARTIFACTS,
    RAW_DIR,
    RAW_MANIFEST,
    RAW_PROCESS_PREFIX,
    TRACKER_JSON,
    raw_manifest,
    raw_pid,
)

_SUFFIXES = sorted(ARTIFACTS.values(), key=len, reverse=True)  # .pftrace.gz before .pftrace
_SUFFIX_RE = "|".join(re.escape(s) for s in _SUFFIXES)
_ARTIFACT_RE = re.compile(rf"^{ARTIFACT_STEM}(0x[0-9a-fA-F]{{1,8}})({_SUFFIX_RE})$")
_KIND_OF = {suffix: kind for kind, suffix in ARTIFACTS.items()}
_CHUNK = 1 << 22


#: Record counts (ranges, markers) known for JSON traces, by file name (see :data:`RECORD_KEYS`).
Counted = Mapping[str, tuple[int, int]]
#: How an artifact was joined from the parts of a split export, by file name: ``{"parts": N,
#: "identity": "bytes" | "trace"}`` (the same bytes as the decoder's whole export, or the same
#: trace); kept in the artifact's manifest entry under :data:`JOINED`.
Joined = Mapping[str, dict]
JOINED = "joined"


def scan_processes(
    capture_dir: Path, counted: Counted | None = None, joined: Joined | None = None
) -> list[dict[str, Any]]:
    """One entry per captured process, from the artifacts and raw captures in the folder;
    the JSON traces named in ``counted`` are not read; the artifacts named in ``joined``
    say how they were joined."""
    found: dict[str, dict[str, Any]] = {}
    for entry in sorted(os.listdir(capture_dir)):
        match = _ARTIFACT_RE.match(entry)
        if match:
            pid_hex, suffix = match.group(1), match.group(2)
            size = (capture_dir / entry).stat().st_size
            artifact = {"path": entry, "bytes": size}
            if entry in (joined or {}):
                artifact[JOINED] = dict(joined[entry])
            _process(found, pid_hex)["artifacts"][_KIND_OF[suffix]] = artifact
    raw_root = capture_dir / RAW_DIR
    if raw_root.is_dir():
        for entry in sorted(os.listdir(raw_root)):
            pid_hex = raw_pid(entry)
            if pid_hex is not None and (raw_root / entry / RAW_MANIFEST).is_file():
                _process(found, pid_hex)["raw"] = raw_manifest(pid_hex)
    processes = sorted(found.values(), key=lambda p: p["pid"])
    for process in processes:
        _count(capture_dir, process, counted or {})
    return processes


def is_artifact(name: str) -> bool:
    """Whether a file name is an artifact's (``iket_pid_0x2b5.trace.json``, ...)."""
    return _ARTIFACT_RE.match(name) is not None


def rescan(
    capture_dir: Path,
    previous: list[dict[str, Any]],
    counted: Counted | None = None,
    joined: Joined | None = None,
) -> list[dict[str, Any]]:
    """:func:`scan_processes` again after artifacts changed; counts that needed a JSON trace
    since removed, labels and arrow counts (``flows``) are kept from ``previous``, and how
    an artifact of the same size was joined."""
    before = {p["pid_hex"]: p for p in previous}
    kept = {
        artifact["path"]: artifact[JOINED]
        for p in previous
        for artifact in p.get("artifacts", {}).values()
        if JOINED in artifact
    }
    processes = scan_processes(capture_dir, counted, {**kept, **(joined or {})})
    for process in processes:
        old = before.get(process["pid_hex"], {})
        for key in ("launches", "ranges", "markers", "labels", "flows", "uninstrumented"):
            if process.get(key) is None and old.get(key) is not None:
                process[key] = old[key]
    return processes


def _process(found: dict[str, dict[str, Any]], pid_hex: str) -> dict[str, Any]:
    key = pid_hex.lower()
    if key not in found:
        found[key] = {
            "pid": int(key, 16),
            "pid_hex": key,
            "artifacts": {},
            "raw": None,
            "kernels": [],
            "launches": None,
            "ranges": None,
            "markers": None,
        }
    return found[key]


def counted_in(processes: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """The record counts ``processes`` (a scan of this run) hold, by their JSON trace's name:
    a later scan of files unchanged since need not count them again."""
    return {
        p["artifacts"]["trace_json"]["path"]: (p["ranges"], p["markers"])
        for p in processes
        if "trace_json" in p["artifacts"] and p.get("ranges") is not None and p.get("markers") is not None
    }


def _count(capture_dir: Path, process: dict[str, Any], counted: Counted) -> None:
    if process["raw"]:
        launches = raw_launches(capture_dir / process["raw"], graphs=True)  # read once for both
        kernels = _decodable(launches)
        named = Namer(kernels)
        process["kernels"] = [
            {"name": name, "short": named(name), "launches": n} for name, n in kernels.items()
        ]
        process["launches"] = sum(kernels.values())
        process["uninstrumented"] = _untraced(launches)
    trace = process["artifacts"].get("trace_json")
    if trace:
        known = counted.get(trace["path"])
        counts = known if known is not None else count_keys(capture_dir / trace["path"], RECORD_KEYS)
        process["ranges"], process["markers"] = counts
        if process["launches"] is None:  # no raw capture (a window's): the trace's own launches
            kernels = kernel_names(capture_dir / trace["path"])
            named = Namer(kernels)
            process["kernels"] = [{"name": n, "short": named(n), "launches": k} for n, k in kernels.items()]
            process["launches"] = sum(kernels.values())


def raw_launches(path: Path, *, graphs: bool = False) -> list[dict[str, Any]]:
    """The launch list of a pass's per-process record (the raw capture's ``iket.data.json``,
    the tracker pass's ``tracker.json``); empty where it is missing or unreadable. ``graphs``:
    with the launches of its CUDA graph replays (``graphLaunches``) after them."""
    return _read_launches(path, graphs=graphs) or []


def _read_launches(path: Path, *, graphs: bool = False) -> list[dict[str, Any]] | None:
    try:
        data = jsonio.read(path)
    except (OSError, ValueError):
        return None
    launches = data.get("launches", []) if isinstance(data, dict) else []
    listed = list(launches) if isinstance(launches, list) else []
    replays = data.get("graphLaunches") if graphs and isinstance(data, dict) else None
    for replay in replays.values() if isinstance(replays, dict) else []:
        listed += replay if isinstance(replay, list) else []
    return [launch for launch in listed if isinstance(launch, dict)]


def launch_counts(folder: Path, file_name: str, *keys: str) -> tuple[Counter, int]:
    """Launches per ``keys`` (e.g. ``kernelName``) pooled over the ``pid_*/file_name`` records of
    one pass, and how many processes had one: process ids differ from pass to pass, so passes
    are compared pooled (pass drift, a reused tracker pass)."""
    counts: Counter = Counter()
    processes = 0
    for path in sorted(folder.glob(f"{RAW_PROCESS_PREFIX}*/{file_name}")):
        launches = _read_launches(path)
        if launches is None:
            continue  # unreadable: not a process of this pass
        processes += 1
        counts.update(tuple(str(launch.get(key, "?")) for key in keys) for launch in launches)
    return counts, processes


def graph_launch_counts(folder: Path, file_name: str) -> Counter:
    """Launches per ``(kernelName,)`` of the CUDA graphs replayed in one pass (the
    ``graphLaunches`` of each ``pid_*/file_name``: graph exec -> its kernels' launches)."""
    counts: Counter = Counter()
    for path in sorted(folder.glob(f"{RAW_PROCESS_PREFIX}*/{file_name}")):
        try:
            graphs = jsonio.read(path).get("graphLaunches")
        except (OSError, ValueError, AttributeError):
            continue
        for launches in graphs.values() if isinstance(graphs, dict) else []:
            for launch in launches if isinstance(launches, list) else []:
                if isinstance(launch, dict):
                    counts[(str(launch.get("kernelName", "?")),)] += 1
    return counts


def _decodable(launches: list[dict[str, Any]]) -> Counter:
    """Launches per kernel name among the decodable launches of a raw capture."""
    return Counter(launch.get("kernelName", "?") for launch in launches if launch.get("canDecode"))


def untraced(raw_manifest_path: Path) -> list[dict[str, Any]]:
    """The launches the capture pass saw but could not trace (``canDecode: false``: kernels
    without IKET annotations, PyTorch's and cuBLAS's around the user's), per kernel in
    first-launch order: ``{kernel, short, launches, grid, block}``. The trace leaves them out;
    the manifest keeps them (``uninstrumented``), so ``iket show`` lists them."""
    return _untraced(raw_launches(raw_manifest_path))


def _untraced(launches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for launch in launches:
        if launch.get("canDecode", True):
            continue
        name = str(launch.get("kernelName", "?"))
        if name not in found:
            found[name] = {
                "kernel": name,
                "launches": 0,
                "grid": [launch.get(f"gridDim{axis}", 0) for axis in "XYZ"],
                "block": [launch.get(f"blockDim{axis}", 0) for axis in "XYZ"],
            }
        found[name]["launches"] += 1
    named = Namer(found)
    return [{**entry, "short": named(entry["kernel"])} for entry in found.values()]


def count_keys(path: Path, keys: tuple[bytes, ...]) -> list[int]:
    """Occurrences of each JSON key in a file, read in chunks (the trace can be GBs)."""
    counts = [0] * len(keys)
    overlap = max(len(k) for k in keys) - 1
    carry = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            data = carry + chunk
            for i, key in enumerate(keys):
                counts[i] += data.count(key) - carry.count(key)
            carry = data[-overlap:] if overlap else b""
    return counts


_KERNEL_NAME = re.compile(rb'"kernelName":"((?:[^"\\]|\\.)*)"')


def kernel_names(path: Path) -> Counter:
    """Launches per kernel name in a JSON trace in the decoder's layout, read in chunks."""
    found: Counter = Counter()
    carry = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            data = carry + chunk
            end = 0
            for match in _KERNEL_NAME.finditer(data):
                found[jsonio.parse(b'"' + match[1] + b'"')] += 1
                end = match.end()
            carry = data[max(end, len(data) - 4096) :]
    return found


#: The keys that count a JSON trace's records: one per range, one per marker.
RECORD_KEYS = (b'"rangeNameIdx"', b'"markerNameIdx"')


def phases_from_stats(stats_path: Path) -> dict[str, float | None]:
    """Per-phase seconds from run-iket's ``--enable-stats`` report (missing: None)."""
    names = {
        "tracker": "trackerWorkload",
        "config": "configGeneration",
        "capture": "profilingWorkload",
        "postprocess": "postprocess",
    }
    try:
        phases = jsonio.read(stats_path).get("phases", {})
    except (OSError, ValueError, AttributeError):
        phases = {}
    result: dict[str, float | None] = {}
    for ours, theirs in names.items():
        ns = (phases.get(theirs) or {}).get("durationNs")
        result[ours] = None if ns is None else round(ns / 1e9, 6)
    return result


def recommended_budget(tracker_dir: Path) -> int | None:
    """The timestamps per warp the tracker pass found its warps emit (run-iket's
    ``recommended_max_ts_cnt_per_warp``), the largest of its processes'; None without one.
    One number per process: the tracker counts no kernel apart (docs/faults.md)."""
    found = None
    for path in sorted(tracker_dir.glob(f"{RAW_PROCESS_PREFIX}*/{TRACKER_JSON}")):
        try:
            value = jsonio.read(path).get("recommended_max_ts_cnt_per_warp")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found = max(found or 0, value)
    return found


def instrumented_kernels(config_path: Path) -> set[str]:
    """The kernels run-iket's generated config instruments (``gen-config/instrument.config.json``):
    those whose launches should carry records; empty where it is missing or unreadable."""
    try:
        modules = jsonio.read(config_path).get("modules")
    except (OSError, ValueError, AttributeError):
        return set()
    names = set()
    for module in modules if isinstance(modules, list) else []:
        functions = module.get("functions") if isinstance(module, dict) else None
        names.update(str(name) for name in (functions if isinstance(functions, dict) else {}))
    return names
