"""The result manifest, ``DIR/manifest.json``: what scripts and CI read about a capture.

Schema version 1 (documented in ``docs/manifest.md``). Paths inside are relative to the
capture directory, so a CI artifact can be moved. Counts per process are read cheaply:
kernels and launches from run-iket's raw capture manifest (``iket/pid_<hex>/iket.data.json``,
a few KB), ranges and markers by counting their keys in the compact trace JSON (no parse).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from .errors import ManifestError
from .outdir import LOG_NAME, MANIFEST_NAME

SCHEMA_VERSION = 1
STATUSES = ("ok", "suspect", "failed", "timeout", "interrupted")
FORMATS = ("perfetto", "json", "html")

#: Artifact kind -> file name suffix after ``iket_pid_<hex>``, as run-iket names them.
ARTIFACTS = {
    "trace_json": ".trace.json",
    "perfetto": ".pftrace",
    "html": ".html",
    "pftrace_gz": ".pftrace.gz",
}
_ARTIFACT_RE = re.compile(r"^iket_pid_(0x[0-9a-fA-F]+)(\.trace\.json|\.pftrace\.gz|\.pftrace|\.html)$")
_CHUNK = 1 << 22


def instrumented(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The processes that launched an instrumented kernel.

    Every CUDA process under the workload gets a capture, so a launcher that only
    initialised CUDA (torchrun's agent, a data-loader worker) comes back with an empty
    trace. Those stay in the manifest (with ``launches: 0``) but are not what a reader
    wants to see first. Unknown counts (``None``) are kept. If no process launched
    anything, all are returned, so the caller still reports the capture as it is.
    """
    found = [p for p in processes if p.get("launches") != 0]
    return found or list(processes)


def formats_for(postprocess: str) -> list[str]:
    """The formats a ``--postprocess`` choice produces, in a stable order."""
    if postprocess == "all":
        return list(FORMATS)
    return [] if postprocess == "none" else [postprocess]


def artifacts_for(formats: list[str]) -> list[str]:
    """Artifact kinds that must exist for each process after postprocessing ``formats``."""
    kinds = {"perfetto": ["perfetto"], "json": ["trace_json"], "html": ["html", "pftrace_gz"]}
    return [kind for fmt in formats for kind in kinds[fmt]]


def scan_processes(capture_dir: Path) -> list[dict[str, Any]]:
    """One entry per captured process, from the artifacts and raw captures in the folder."""
    found: dict[str, dict[str, Any]] = {}
    for entry in sorted(os.listdir(capture_dir)):
        match = _ARTIFACT_RE.match(entry)
        if match:
            pid_hex, suffix = match.group(1), match.group(2)
            kind = next(k for k, s in ARTIFACTS.items() if s == suffix)
            size = (capture_dir / entry).stat().st_size
            _process(found, pid_hex)["artifacts"][kind] = {"path": entry, "bytes": size}
    raw_root = capture_dir / "iket"
    if raw_root.is_dir():
        for entry in sorted(os.listdir(raw_root)):
            if entry.startswith("pid_0x") and (raw_root / entry / "iket.data.json").is_file():
                _process(found, entry[4:])["raw"] = f"iket/{entry}/iket.data.json"
    processes = sorted(found.values(), key=lambda p: p["pid"])
    for process in processes:
        _count(capture_dir, process)
    return processes


def rescan(capture_dir: Path, previous: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`scan_processes` again after artifacts changed; counts that needed a JSON trace
    since removed, and labels, are kept from ``previous``."""
    before = {p["pid_hex"]: p for p in previous}
    processes = scan_processes(capture_dir)
    for process in processes:
        old = before.get(process["pid_hex"], {})
        for key in ("launches", "ranges", "markers", "labels"):
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


def _count(capture_dir: Path, process: dict[str, Any]) -> None:
    if process["raw"]:
        kernels = raw_kernels(capture_dir / process["raw"])
        process["kernels"] = [{"name": name, "launches": n} for name, n in kernels.items()]
        process["launches"] = sum(kernels.values())
    trace = process["artifacts"].get("trace_json")
    if trace:
        counts = count_keys(capture_dir / trace["path"], (b'"rangeNameIdx"', b'"markerNameIdx"'))
        process["ranges"], process["markers"] = counts
        if process["launches"] is None:
            (process["launches"],) = count_keys(capture_dir / trace["path"], (b'"kernelName"',))


def raw_kernels(raw_manifest: Path) -> Counter:
    """Launches per kernel name among the decodable launches of a raw capture."""
    try:
        data = json.loads(raw_manifest.read_bytes())
    except (OSError, ValueError):
        return Counter()
    return Counter(
        launch.get("kernelName", "?") for launch in data.get("launches", []) if launch.get("canDecode")
    )


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


def phases_from_stats(stats_path: Path) -> dict[str, float | None]:
    """Per-phase seconds from run-iket's ``--enable-stats`` report (missing: None)."""
    names = {
        "tracker": "trackerWorkload",
        "config": "configGeneration",
        "capture": "profilingWorkload",
        "postprocess": "postprocess",
    }
    try:
        phases = json.loads(stats_path.read_text()).get("phases", {})
    except (OSError, ValueError):
        phases = {}
    result: dict[str, float | None] = {}
    for ours, theirs in names.items():
        ns = (phases.get(theirs) or {}).get("durationNs")
        result[ours] = None if ns is None else round(ns / 1e9, 6)
    return result


def write(capture_dir: Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest.json`` atomically (temporary file, then rename)."""
    errors = validate(manifest)
    if errors:
        raise ManifestError(f"refusing to write an invalid manifest: {errors[0]}")
    path = capture_dir / MANIFEST_NAME
    tmp = path.with_name(f".{MANIFEST_NAME}.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path


def read(location: Path) -> dict[str, Any]:
    """Read and validate the manifest of a capture directory (or a manifest file)."""
    path = location / MANIFEST_NAME if location.is_dir() else location
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(
            f"{location} is not an iket capture (no {MANIFEST_NAME})",
            hint="give the directory that iket profile wrote",
        ) from None
    except (OSError, ValueError) as error:
        raise ManifestError(f"{path} is not readable JSON: {error}") from None
    errors = validate(data)
    if errors:
        raise ManifestError(f"{path} does not follow the manifest schema: {errors[0]}")
    return data


# A small declarative schema: key -> allowed types. Nested objects are checked by
# their own tables below. Kept by hand so the CLI needs no jsonschema dependency.
_NUM = (int, float)
_TOP = {
    "schema_version": (int,),
    "status": (str,),
    "error": (dict, type(None)),
    "target": (dict,),
    "argv": (list,),
    "run_iket_argv": (list,),
    "cwd": (str,),
    "started_at": (str,),
    "finished_at": (str,),
    "duration_s": _NUM,
    "phases": (dict,),
    "versions": (dict,),
    "postprocess": (list,),
    "keep": (bool,),
    "log": (str,),
    "processes": (list,),
}
_PROCESS = {
    "pid": (int,),
    "pid_hex": (str,),
    "artifacts": (dict,),
    "raw": (str, type(None)),
    "kernels": (list,),
    "launches": (int, type(None)),
    "ranges": (int, type(None)),
    "markers": (int, type(None)),
}
_VERSIONS = {"iket_cli": (str,), "run_iket": (str, type(None)), "python": (str,), "gpus": (list,)}


def validate(data: Any) -> list[str]:
    """Every way ``data`` departs from schema version 1 (empty when it conforms)."""
    if not isinstance(data, dict):
        return ["the manifest is not a JSON object"]
    errors = _check_table(data, _TOP, "")
    if errors:
        return errors
    if data["schema_version"] != SCHEMA_VERSION:
        errors.append(f"schema_version {data['schema_version']} is not {SCHEMA_VERSION}")
    if data["status"] not in STATUSES:
        errors.append(f"status {data['status']!r} is not one of {', '.join(STATUSES)}")
    errors += [e for e in _check_table(data["versions"], _VERSIONS, "versions.")]
    for fmt in data["postprocess"]:
        if fmt not in FORMATS:
            errors.append(f"postprocess format {fmt!r} is not one of {', '.join(FORMATS)}")
    for i, process in enumerate(data["processes"]):
        if not isinstance(process, dict):
            errors.append(f"processes[{i}] is not an object")
            continue
        errors += _check_table(process, _PROCESS, f"processes[{i}].")
        for kind, artifact in process.get("artifacts", {}).items():
            if kind not in ARTIFACTS:
                errors.append(f"processes[{i}].artifacts.{kind} is not a known artifact")
            elif not (isinstance(artifact, dict) and isinstance(artifact.get("path"), str)):
                errors.append(f"processes[{i}].artifacts.{kind} has no path")
            elif Path(artifact["path"]).is_absolute():
                errors.append(f"processes[{i}].artifacts.{kind}.path is not relative")
    return errors


def _check_table(data: dict, table: dict[str, tuple], prefix: str) -> list[str]:
    errors = []
    for key, types in table.items():
        if key not in data:
            errors.append(f"{prefix}{key} is missing")
        elif not isinstance(data[key], types) or (isinstance(data[key], bool) and bool not in types):
            names = "/".join("null" if t is type(None) else t.__name__ for t in types)
            errors.append(f"{prefix}{key} should be {names}")
    return errors


__all__ = [
    "LOG_NAME",
    "MANIFEST_NAME",
    "SCHEMA_VERSION",
    "artifacts_for",
    "formats_for",
    "phases_from_stats",
    "read",
    "scan_processes",
    "validate",
    "write",
]
