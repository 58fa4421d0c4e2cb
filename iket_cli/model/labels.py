"""Rank, host and device labels of captured processes, from iket's start-up hook.

The hook (``iket_cli/capture/_hook/sitecustomize.py``) writes one JSON line per Python process of
the passes; here the capture pass's lines are matched to the captured processes by pid
(run-iket names each process's output ``pid_<hex>`` after the capture-pass pid). The hook's
``payload`` lines — each CuTe DSL event name's payload type as compiled — become the
process's ``payload_sites``, which :mod:`iket_cli.analysis.lint` checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import jsonio

_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
_LOCAL_RANK_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")


def _records(procs_file: Path) -> list[dict[str, Any]]:
    try:
        lines = procs_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            record = jsonio.parse(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def read(procs_file: Path) -> dict[int, dict[str, Any]]:
    """pid -> label, from the capture pass's records (the last start record of a pid wins:
    the shim execs the workload in the same process)."""
    found: dict[int, dict[str, Any]] = {}
    for record in _records(procs_file):
        pid = record.get("pid")
        if record.get("event") == "start" and record.get("pass") == "capture":
            found[pid] = _label(record)
        elif record.get("event") == "device" and pid in found:
            found[pid].update(cuda_device=record.get("cuda_device"), gpu=record.get("gpu"))
    for label in found.values():  # a spawner's children name it: "child of python spawner.py"
        parent = found.get(label["ppid"])
        label["parent_argv"] = parent["argv"] if parent else None
    return found


def payload_sites(procs_file: Path) -> dict[int, list[dict[str, Any]]]:
    """pid -> the distinct ``{op, name, type}`` the process compiled (type null: no payload)."""
    found: dict[int, set[tuple]] = {}
    for record in _records(procs_file):
        if record.get("event") == "payload":
            site = (record.get("op"), record.get("name"), record.get("type"))
            found.setdefault(record.get("pid"), set()).add(site)
    return {
        pid: [{"op": op, "name": name, "type": kind} for op, name, kind in sorted(sites, key=str)]
        for pid, sites in found.items()
    }


def unmatched_payloads(procs_file: Path) -> list[str]:
    """The CuTe DSL token ranges whose ``range_start`` and ``range_end`` were compiled with
    different payloads (one with, one without, or two types), as ``name (start: i32, end:
    none)``. CuTe DSL requires the same at both ends; run-iket's capture pass dies of
    a payload at the start only (SIGSEGV on the H200: docs/gpu/pipeline/), so a crash's
    diagnosis names them."""
    ends: dict[str, dict[str, set]] = {}
    for sites in payload_sites(procs_file).values():
        for site in sites:
            if site["op"] in ("range_start", "range_end"):
                ends.setdefault(site["name"], {"range_start": set(), "range_end": set()})[site["op"]].add(
                    site["type"] or "none"
                )
    return [
        f"{name} (start: {', '.join(sorted(e['range_start']))}, end: {', '.join(sorted(e['range_end']))})"
        for name, e in sorted(ends.items())
        if e["range_start"] and e["range_end"] and e["range_start"] != e["range_end"]
    ]


def _label(record: dict[str, Any]) -> dict[str, Any]:
    env = record.get("env", {})

    def first(names: tuple[str, ...]) -> int | None:
        for name in names:
            if str(env.get(name, "")).isdigit():
                return int(env[name])
        return None

    world = env.get("WORLD_SIZE")
    return {
        "ppid": record.get("ppid"),
        "argv": record.get("argv"),
        "hostname": record.get("hostname"),
        "rank": first(_RANK_VARS),
        "local_rank": first(_LOCAL_RANK_VARS),
        "world_size": int(world) if str(world or "").isdigit() else None,
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "cuda_device": None,
        "gpu": None,
        "env": env,
    }


def attach(processes: list[dict[str, Any]], procs_file: Path) -> None:
    """Add ``labels`` (and ``payload_sites``) to every manifest process entry the hook recorded."""
    known, sites = read(procs_file), payload_sites(procs_file)
    for process in processes:
        if process["pid"] in known:
            process["labels"] = known[process["pid"]]
        if process["pid"] in sites:
            process["payload_sites"] = sites[process["pid"]]


def describe(process: dict[str, Any]) -> str:
    """``rank 1 (pid 0x2b5)`` where the rank is known; ``pid 0x2b5 (child of 0x2b0)`` where the
    parent was a Python process of the workload; else ``pid 0x2b5``."""
    labels = process.get("labels") or {}
    if labels.get("rank") is not None:
        return f"rank {labels['rank']} (pid {process['pid_hex']})"
    if labels.get("parent_argv") and labels.get("ppid") is not None:
        return f"pid {process['pid_hex']} (child of {hex(labels['ppid'])})"
    return f"pid {process['pid_hex']}"
