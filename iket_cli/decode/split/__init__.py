"""The fast path: a big process's JSON and Perfetto exports split so that they decode on every
core: by launch (each decodable launch exported by a worker of its own, then the parts
joined), and a big launch by CTA chunks (each chunk exported apart, then stitched back).

Two wings, one per export: :mod:`.json` (joined back byte for byte) and :mod:`.perfetto`
(joined into the same trace). Each runs behind :class:`.base.Run` (what it may ask of the
pool) and registers here what the plain path hands it: a split export, a part's export in
a worker, the jobs a worker writes for it, a part it keeps in memory. Shared by both:
:mod:`.launches` (the launch plan), :mod:`.chunks` (which launches split by CTAs),
:mod:`.sidecar` (numpy arrays kept beside a part). The plain decode names no module of a
wing: only this registry.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

from ...model.vocab import JSON_EXPORT, PERFETTO_EXPORT

#: The wing that splits each export (a package beside this module).
WINGS = {JSON_EXPORT: "json", PERFETTO_EXPORT: "perfetto"}


def wing(export: str) -> Any:
    """The wing of ``export``: its package, which names what it does (``by_launches``,
    ``export_part``, ``export_whole``, ``JOBS``, ``run_job``, ``spool_kept``, ``preload``)."""
    return import_module(f"{__name__}.{WINGS[export]}")


def run_job(job: dict, held: dict[str, Any]) -> dict | None:
    """Write one job in a worker, by the wing that registered its ``kind``; what it says."""
    for export in WINGS:
        mine = wing(export)
        if job.get("kind") in mine.JOBS:
            return mine.run_job(job, held)
    raise ValueError(f"no wing writes jobs of kind {job.get('kind')!r}")


def spool_kept(export: str, part: Any, spool: Path) -> None:
    """A part kept in a worker's memory (:attr:`..tasks.Kept`) written to its files."""
    wing(export).spool_kept(part, spool)


def preload() -> None:
    """Import what each wing's work in a worker needs (numpy among it)."""
    for export in WINGS:
        wing(export).preload()
