"""The result manifest, ``DIR/manifest.json``: its schema, and reading and writing it.

Schema version 1 (documented in ``docs/manifest.md``). Paths inside are relative to the
capture directory, so a CI artifact can be moved. The record itself is built in one
place, :mod:`iket_cli.model.record`; the per-process entries in
:mod:`iket_cli.model.artifacts`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import ManifestError
from .vocab import ARTIFACTS, FORMATS, MANIFEST_NAME, MODES, STATUSES

SCHEMA_VERSION = 1
#: The key that marks a manifest as iket's own (see :func:`is_capture`).
MANIFEST_MARK = "schema_version"


def is_capture(path: Path) -> bool:
    """Whether ``path`` is a directory holding an iket manifest (read cheaply: its head)."""
    manifest = path / MANIFEST_NAME
    if path.is_symlink() or not manifest.is_file():
        return False
    try:
        with open(manifest, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return f'"{MANIFEST_MARK}"'.encode() in head


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
    location = Path(location)
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
    "log": (str, type(None)),
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
    if data.get("mode", MODES[0]) not in MODES:  # absent from older manifests
        errors.append(f"mode {data['mode']!r} is not one of {', '.join(MODES)}")
    errors += _check_table(data["versions"], _VERSIONS, "versions.")
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
