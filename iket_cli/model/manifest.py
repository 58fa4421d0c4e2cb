"""The result manifest, ``DIR/manifest.json``: its schema, and reading and writing it.

Schema version 1 (documented in ``docs/manifest.md``). Paths inside are relative to the
capture directory, so a CI artifact can be moved. The record itself is built in one
place, :mod:`iket_cli.model.record`; the per-process entries in
:mod:`iket_cli.model.artifacts`.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ManifestError
from . import atomic, completeness, jsonio
from .vocab import ARTIFACTS, EVIDENCE_STATUSES, FORMATS, MANIFEST_NAME, MODES, STATUSES

SCHEMA_VERSION = 1
#: The largest process id a manifest may name (Linux's pid_max limit is 2**22).
MAX_PID = 2**31 - 1


def status_of(path: Path) -> str | None:
    """The status of the iket capture in directory ``path``; None where it holds none.

    A capture is recognised by its manifest's whole shape (:func:`validate`), not by a key
    that any other program's ``manifest.json`` may have too: ``--clobber`` replaces only
    what this returns a status for.
    """
    manifest = path / MANIFEST_NAME
    if path.is_symlink() or manifest.is_symlink() or not manifest.is_file():
        return None
    try:
        data = jsonio.read(manifest)
    except (OSError, ValueError):
        return None
    return data["status"] if not validate(data) else None


def is_capture(path: Path) -> bool:
    """Whether ``path`` is a directory holding an iket capture (see :func:`status_of`)."""
    return status_of(path) is not None


def is_evidence(path: Path) -> bool:
    """Whether ``path`` holds a failed attempt's evidence (a ``DIR.failed/`` iket wrote), which
    the next failed attempt may replace; a capture that succeeded is never replaced so."""
    return status_of(path) in EVIDENCE_STATUSES


def inside(capture_dir: Path, relative: str) -> Path:
    """``capture_dir / relative``, a file a manifest names, refused where it leads outside the
    capture (through a symlink: :func:`validate` refuses ``..`` and absolute paths)."""
    path = capture_dir / relative
    root = capture_dir.resolve()
    if root not in path.resolve().parents:
        raise ManifestError(
            f"{path} leads outside the capture {capture_dir} (a symlink to {path.resolve()})",
            hint="a capture's artifacts are files inside it: replace the link by the file",
        )
    return path


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


def replay_line(record: dict[str, Any]) -> str | None:
    """``a replay of call 3 of kernels:launch ...``: what an ``--extract`` or ``--replay``
    capture holds (or a window, :func:`window_line`), said the same way by the console,
    ``iket show`` and the report."""
    extract = record.get("extract")
    if not isinstance(extract, dict):
        return window_line(record)
    calls = [str(c) for c in extract.get("calls") or []]
    which = f"call {calls[0]}" if len(calls) == 1 else f"calls {', '.join(calls)}"
    record_run = extract.get("record") or {}
    if extract.get("replay_of"):
        source = f"saved in {extract['replay_of']}"
    elif record_run.get("seconds") is not None:
        source = f"recorded in a plain run of {record_run['seconds']:.1f} s"
    else:
        source = "recorded in a plain run"
    differing = [c["call"] for c in (extract.get("replay") or {}).get("calls", []) if not c.get("equal")]
    check = f"; the result of call {differing[0]} differs from the recorded one" if differing else ""
    return f"a replay of {which} of {extract.get('function')} ({source}){check}"


def window_line(record: dict[str, Any]) -> str | None:
    """What an in-process capture holds: ``call 3 of kernels:launch, in the live process``."""
    window = record.get("window")
    if not isinstance(window, dict):
        return None
    run = window.get("run_s")
    ran = f" (one run of {run:.1f} s, no tracker pass)" if isinstance(run, (int, float)) else ""
    if window.get("one_pass"):
        return f"the whole run in one in-process session{ran}"
    calls = window.get("calls")
    if isinstance(calls, list) and len(calls) == 2:
        which = f"call {calls[0]}" if calls[0] == calls[1] else f"calls {calls[0]}-{calls[1]}"
        return f"{which} of {window.get('function')}, in the live process{ran}"
    pid = window.get("pid")
    whose = f"window {window.get('number')} of process {pid:#x}" if isinstance(pid, int) else "a window"
    listed = window.get("earlier")  # a list of ``{number, folder}``, unless damaged
    earlier = (
        [f"{w.get('folder')} ({w.get('number')})" for w in listed if isinstance(w, dict)]
        if isinstance(listed, list)
        else []
    )
    more = f"; its earlier windows: {', '.join(earlier)}" if earlier else ""
    return f"{whose} opened at {window.get('where')}, in the live process{more}"


def write(capture_dir: Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest.json`` atomically (temporary file, then rename)."""
    errors = validate(manifest)
    if errors:
        raise ManifestError(f"refusing to write an invalid manifest: {errors[0]}")
    return atomic.write(capture_dir / MANIFEST_NAME, json.dumps(manifest, indent=2, sort_keys=False) + "\n")


def read(location: Path) -> dict[str, Any]:
    """Read and validate the manifest of a capture directory (or a manifest file)."""
    location = Path(location)
    path = location / MANIFEST_NAME if location.is_dir() else location
    try:
        data = jsonio.read(path)
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
_OBJECT_OR_NULL = (dict, type(None))
#: Keys a manifest may have or not (older manifests lack them); their types when present.
_OPTIONAL_TOP = {
    "mode": (str,),
    "command": (list, type(None)),
    "lint": (list,),
    "drift": (list,),
    "trace_budget": (dict,),
    "overhead": _OBJECT_OR_NULL,
    "warm": _OBJECT_OR_NULL,
    "dsl_cache": _OBJECT_OR_NULL,
    "annotations": _OBJECT_OR_NULL,
    "repeats": (list, type(None)),
    "tracker": (dict,),
    "extract": _OBJECT_OR_NULL,
    "completeness": _OBJECT_OR_NULL,
    "window": _OBJECT_OR_NULL,
}
_OPTIONAL_PROCESS = {
    "repeat": (int,),
    "labels": (dict,),
    "flows": (int, type(None)),
    "uninstrumented": (list,),
    "payload_sites": (list,),
}
_REPEAT = {"index": (int,), "dir": (str,), "status": (str,), "processes": (list,)}


def validate(data: Any) -> list[str]:
    """Every way ``data`` departs from schema version 1 (empty when it conforms).

    Paths inside (artifacts, the raw capture, the log, the repeats' folders) must stay inside
    the capture: relative, without ``..``, so no reader is led outside it.
    """
    if not isinstance(data, dict):
        return ["the manifest is not a JSON object"]
    errors = _check_table(data, _TOP, "")
    if errors:
        return errors
    errors += _check_table(data, _OPTIONAL_TOP, "", optional=True)
    if data["schema_version"] != SCHEMA_VERSION:
        errors.append(f"schema_version {data['schema_version']} is not {SCHEMA_VERSION}")
    if data["status"] not in STATUSES:
        errors.append(f"status {data['status']!r} is not one of {', '.join(STATUSES)}")
    if data.get("mode", MODES[0]) not in MODES:  # absent from older manifests
        errors.append(f"mode {data['mode']!r} is not one of {', '.join(MODES)}")
    errors += _check_table(data["versions"], _VERSIONS, "versions.")
    errors += _inside(data["log"], "log")
    for fmt in data["postprocess"]:
        if fmt not in FORMATS:
            errors.append(f"postprocess format {fmt!r} is not one of {', '.join(FORMATS)}")
    for i, process in enumerate(data["processes"]):
        errors += _process(process, f"processes[{i}].")
    for i, repeat in enumerate(data.get("repeats") or []):
        errors += _repeat(repeat, f"repeats[{i}].")
    if errors:  # the optional keys' types are wrong: their contents are not looked into
        return errors
    if data.get("command") is not None and not all(isinstance(w, str) for w in data["command"]):
        errors.append("command is not a list of words")
    if not all(isinstance(g, dict) for g in data["versions"].get("gpus") or []):
        errors.append("versions.gpus is not a list of GPUs")
    for i, finding in enumerate(data.get("lint") or []):
        if not (
            isinstance(finding, dict)
            and all(isinstance(finding.get(k), str) for k in ("code", "message"))
            and all(k in finding and isinstance(finding[k], (str, type(None))) for k in ("kernel", "hint"))
        ):
            errors.append(f"lint[{i}] is not a finding")
    if not all(isinstance(line, str) for line in data.get("drift") or []):
        errors.append("drift is not a list of sentences")
    if data.get("extract") is not None:
        errors += _extract(data["extract"])
    if data.get("completeness") is not None:
        errors += completeness.validate(data["completeness"])
    return errors


_INT_OR_NULL = (int, type(None))
_EXTRACT = {
    "function": (str, type(None)),
    "calls": (list,),
    "arguments": (list,),
    "bytes": (int,),
    "record": _OBJECT_OR_NULL,
    "replay_of": (str, type(None)),
    "replay": _OBJECT_OR_NULL,
}
_RECORD_RUN = {"seconds": (*_NUM, type(None)), "status": (str,), "pid": _INT_OR_NULL, "rank": _INT_OR_NULL}
_REPLAYED = {"call": (int,), "equal": (bool,), "differences": (list,)}


def _extract(extract: dict) -> list[str]:
    """The ``extract`` record's fields, typed: readers (show, the report) print them."""
    errors = _check_table(extract, _EXTRACT, "extract.", optional=True)
    if errors:
        return errors
    if not all(_is_int(c) for c in extract.get("calls") or []):
        errors.append("extract.calls is not a list of call numbers")
    if not all(isinstance(a, dict) for a in extract.get("arguments") or []):
        errors.append("extract.arguments is not a list of objects")
    if extract.get("record") is not None:
        errors += _check_table(extract["record"], _RECORD_RUN, "extract.record.", optional=True)
    calls = (extract.get("replay") or {}).get("calls", [])
    if not isinstance(calls, list):
        return [*errors, "extract.replay.calls is not a list"]
    for i, call in enumerate(calls):
        if not isinstance(call, dict):
            errors.append(f"extract.replay.calls[{i}] is not an object")
        else:
            errors += _check_table(call, _REPLAYED, f"extract.replay.calls[{i}].", optional=True)
    return errors


def _dims(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 3 and all(_is_int(v) for v in value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _process(process: Any, prefix: str) -> list[str]:
    if not isinstance(process, dict):
        return [f"{prefix[:-1]} is not an object"]
    errors = _check_table(process, _PROCESS, prefix) + _check_table(
        process, _OPTIONAL_PROCESS, prefix, optional=True
    )
    if errors:
        return errors
    if not 0 <= process["pid"] <= MAX_PID:
        errors.append(f"{prefix}pid {process['pid']} is not a process id")
    errors += _inside(process["raw"], f"{prefix}raw")
    for kind, artifact in process["artifacts"].items():
        if kind not in ARTIFACTS:
            errors.append(f"{prefix}artifacts.{kind} is not a known artifact")
        elif not (isinstance(artifact, dict) and isinstance(artifact.get("path"), str)):
            errors.append(f"{prefix}artifacts.{kind} has no path")
        else:
            errors += _inside(artifact["path"], f"{prefix}artifacts.{kind}.path")
    for j, kernel in enumerate(process["kernels"]):
        if not (isinstance(kernel, dict) and isinstance(kernel.get("name"), str)):
            errors.append(f"{prefix}kernels[{j}] has no name")
    for j, untraced in enumerate(process.get("uninstrumented") or []):
        if not (isinstance(untraced, dict) and isinstance(untraced.get("kernel"), str)):
            errors.append(f"{prefix}uninstrumented[{j}] has no kernel")
        elif not _is_int(untraced.get("launches")) or not isinstance(untraced.get("short"), str):
            errors.append(f"{prefix}uninstrumented[{j}] has no launches count")
        elif not all(_dims(untraced.get(key)) for key in ("grid", "block")):
            errors.append(f"{prefix}uninstrumented[{j}] has no grid and block")
    for j, site in enumerate(process.get("payload_sites") or []):
        if not (isinstance(site, dict) and all(isinstance(site.get(k), str) for k in ("op", "name"))):
            errors.append(f"{prefix}payload_sites[{j}] has no op and name")
    return errors


def _repeat(repeat: Any, prefix: str) -> list[str]:
    if not isinstance(repeat, dict):
        return [f"{prefix[:-1]} is not an object"]
    errors = _check_table(repeat, _REPEAT, prefix)
    return errors or _inside(repeat["dir"], f"{prefix}dir")


def _inside(path: str | None, where: str) -> list[str]:
    """A path the manifest names must stay inside the capture: relative, without ``..``."""
    if path is None:
        return []
    if PurePosixPath(path).is_absolute():
        return [f"{where} is not relative"]
    if ".." in PurePosixPath(path).parts or "\0" in path:
        return [f"{where} leads outside the capture ({path!r})"]
    return []


def _check_table(data: dict, table: dict[str, tuple], prefix: str, *, optional: bool = False) -> list[str]:
    errors = []
    for key, types in table.items():
        if key not in data:
            if not optional:
                errors.append(f"{prefix}{key} is missing")
        elif not isinstance(data[key], types) or (isinstance(data[key], bool) and bool not in types):
            names = "/".join("null" if t is type(None) else t.__name__ for t in types)
            errors.append(f"{prefix}{key} should be {names}")
    return errors
