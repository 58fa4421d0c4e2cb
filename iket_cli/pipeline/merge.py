"""``iket merge``: one capture made of several (one per node, one per job).

Each input keeps its artifacts under a folder of its own inside the merged capture
(``OUT/<input name>/iket_pid_<hex>.*``): run-iket's file names stay as they are and pids
that repeat across hosts cannot collide. Files are hard-linked where the file system
allows it (``--copy`` copies them). The merged manifest lists every process with its
source, host and rank; ``iket show`` and ``iket diff`` read it like any other capture.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from .._version import __version__
from ..capture import outdir
from ..capture.staging import Staging
from ..errors import Status, UsageError
from ..model import atomic, completeness, labels, pftrace
from ..model import manifest as manifest_mod
from ..model import record as record_mod
from ..model.vocab import FORMATS, MERGE_STATUSES, TIMELINE_NAME
from ..system import filesystem


def merge(
    out: Path,
    inputs: list[Path],
    *,
    copy: bool = False,
    clobber: bool = False,
    timeline: bool = False,
    offsets: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Build the merged capture in ``out`` (staged, then published atomically).

    With ``timeline``, also ``OUT/timeline.pftrace``: every process on one Perfetto
    timeline, its root track named after the source, host, rank and pid; ``offsets`` maps
    an input (as given, or its folder name) to nanoseconds added to its timestamps.
    """
    if len(inputs) < 2:
        raise UsageError("iket merge needs at least two captures", hint="iket merge OUT CAPTURE CAPTURE...")
    records = [_read_input(path) for path in inputs]
    _refuse_conflicts(inputs, records)
    target = outdir.check(out, cwd=Path.cwd(), clobber=clobber)
    _refuse_an_input_as_out(target, inputs)
    names = _folder_names(inputs)
    try:
        return _merged(
            target, inputs, records, names, copy=copy, timeline=timeline, offsets=offsets, clobber=clobber
        )
    except OSError as error:  # a full disk is OUT's disk (an input's name would mislead)
        raise filesystem.from_os_error(error, target.parent) from None


def _merged(
    target: Path,
    inputs: list[Path],
    records: list[dict],
    names: list[str],
    *,
    copy: bool,
    timeline: bool,
    offsets: dict[str, int] | None,
    clobber: bool,
) -> dict[str, Any]:
    """The merge made in a staging folder beside OUT, and published."""
    with outdir.Lock(target), Staging.create(target) as staging:
        folder = staging.finalize()
        processes = []
        for path, source, name in zip(inputs, records, names, strict=True):
            processes += _bring(path, source, folder / name, name, copy)
        merged = _manifest(inputs, records, processes)
        if timeline:
            merged["timeline"] = _timeline(folder, processes, _offsets(inputs, names, offsets or {}))
        manifest_mod.write(folder, merged)
        staging.publish(clobber=clobber)
    return merged


def _read_input(path: Path) -> dict[str, Any]:
    record = manifest_mod.read(path)
    if record["status"] not in MERGE_STATUSES:
        raise UsageError(f"{path} is a {record['status']} capture", hint="merge only captures that succeeded")
    return record


def _refuse_conflicts(inputs: list[Path], records: list[dict]) -> None:
    seen: dict[Path, Path] = {}
    for path in inputs:
        real = path.resolve()
        if real in seen:
            raise UsageError(f"{path} is given twice (as {seen[real]})", hint="name each capture once")
        seen[real] = path
    owners: dict[tuple, Path] = {}
    for path, record in zip(inputs, records, strict=True):
        for process in record["processes"]:
            host = (process.get("labels") or {}).get("hostname")
            key = (host, process["pid"], record["started_at"], process.get("repeat"))
            if key in owners:
                raise UsageError(
                    f"{path} and {owners[key]} hold the same process (pid {process['pid_hex']}"
                    f"{f' on {host}' if host else ''}, started {record['started_at']}): one is a copy",
                    hint="merge each capture once",
                )
            owners[key] = path


def _refuse_an_input_as_out(out: Path, inputs: list[Path]) -> None:
    """OUT is replaced once the merge is made: it may not be an input, hold one or lie in one."""
    real = out.resolve()
    for path in inputs:
        source = path.resolve()
        if real == source or real in source.parents or source in real.parents:
            relation = "is" if real == source else "contains" if real in source.parents else "lies in"
            raise UsageError(
                f"OUT {out} {relation} the input {path}: the merge would replace what it reads",
                hint="give OUT a new folder",
            )


def _folder_names(inputs: list[Path]) -> list[str]:
    names: list[str] = []
    for path in inputs:
        base = path.resolve().name or "capture"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _bring(source: Path, source_record: dict, folder: Path, name: str, copy: bool) -> list[dict]:
    folder.mkdir()
    processes = []
    for process in source_record["processes"]:
        entry = {**process, "artifacts": {}, "raw": None, "source": str(source.resolve()), "folder": name}
        for kind, artifact in process["artifacts"].items():
            src = manifest_mod.inside(source, artifact["path"])
            dest = folder / artifact["path"]  # a repeat's files stay in its repeat-<k>/
            dest.parent.mkdir(parents=True, exist_ok=True)
            _place(src, dest, copy)
            entry["artifacts"][kind] = {"path": f"{name}/{artifact['path']}", "bytes": artifact["bytes"]}
        processes.append(entry)
    return processes


def _place(src: Path, dest: Path, copy: bool) -> None:
    if dest.exists():  # a manifest that names one file twice: it is already in place
        return
    if not copy:
        try:
            os.link(src, dest)
            return
        except OSError:
            pass  # another file system, or links not allowed: copy instead
    shutil.copy2(src, dest)


def _manifest(inputs: list[Path], records: list[dict], processes: list[dict]) -> dict[str, Any]:
    formats = [f for f in FORMATS if all(f in r["postprocess"] for r in records)]
    return record_mod.build(
        status=Status.OK,
        target={
            "kind": "merge",
            "spec": "",
            "args": [str(p) for p in inputs],
            "display": f"merge of {len(inputs)} captures",
        },
        cwd=str(Path.cwd()),
        started_at=min(r["started_at"] for r in records),
        finished_at=max(r["finished_at"] for r in records),
        duration_s=0.0,
        versions={**records[0]["versions"], "iket_cli": __version__},
        postprocess=formats,
        keep=False,
        processes=processes,
        completeness=completeness.pooled(
            [(str(p), r.get("completeness")) for p, r in zip(inputs, records, strict=True)]
        ),
        sources=[
            {"path": str(p.resolve()), "started_at": r["started_at"], "target": r["target"]}
            for p, r in zip(inputs, records, strict=True)
        ],
    )


def _offsets(inputs: list[Path], names: list[str], given: dict[str, int]) -> dict[str, int]:
    """Offsets by folder name; an input may be named as given on the command line or by folder."""
    result = {}
    for key, value in given.items():
        matches = [name for path, name in zip(inputs, names, strict=True) if key in (str(path), name)]
        if not matches:
            raise UsageError(
                f"--offset names {key!r}, which is not one of the captures",
                hint="use a capture's path as given, or its folder name",
            )
        result[matches[0]] = value
    return result


def _timeline(folder: Path, processes: list[dict], offsets: dict[str, int]) -> str:
    sources = []
    for process in manifest_mod.instrumented(processes):  # not torchrun's agent and other empty captures
        artifact = process["artifacts"].get("perfetto")
        if artifact is None:
            continue
        host = (process.get("labels") or {}).get("hostname")
        label = " · ".join(p for p in (process["folder"], host, labels.describe(process)) if p)
        data = (folder / artifact["path"]).read_bytes()
        sources.append((data, label, offsets.get(process["folder"], 0)))
    if not sources:
        raise UsageError(
            "no input has a Perfetto trace to put on a timeline",
            hint="capture with --postprocess perfetto or all",
        )
    try:
        merged = pftrace.merge(sources)
    except ValueError as error:
        raise UsageError(
            f"a Perfetto trace of the inputs is not readable ({error})",
            hint="decode that capture again (iket postprocess DIR), or merge without --timeline",
        ) from None
    atomic.write(folder / TIMELINE_NAME, merged)
    return TIMELINE_NAME
