"""What CuTe DSL workloads write beside their trace: warp roles and dataflow DAGs.

* ``kernel_symbols.json`` (``cutlass.pipeline.profiling.dump_profiling_metadata``): each
  ``WarpScope`` of a warp-specialised kernel, ``{"warps": {"Producer": {"warp_start": 0,
  "warp_end": 1}, ...}}`` (the end is exclusive), and its pipeline barriers' stages (not
  read here).
* ``<name>.iket_dag.json`` (``iket.dag(name)...save()``): ``{"name", "regions", "edges":
  [{"source", "target", "label"?, "via"?}]}``, regions named as the kernel's ranges.

Both are read and checked here; a file that is not what it says is a one-line error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ManifestError
from . import jsonio
from .vocab import DAG_SUFFIX, ROLES_NAME

#: The most warps a CTA holds (1,024 threads): a role's warps lie in [0, this).
MAX_WARPS = 32
#: The most edges a DAG may have: a pipeline has a handful; more is not a DAG iket can draw.
MAX_EDGES = 10_000
#: The largest annotation file read (a DAG or a roles file is a few KB).
MAX_BYTES = 4 << 20


@dataclass(frozen=True)
class Roles:
    """Warp index within its CTA -> role name."""

    warps: dict[str, tuple[int, int]]  # role -> [warp_start, warp_end)
    path: Path | None = None

    def role(self, warp_id: int) -> str | None:
        for name, (first, end) in self.warps.items():
            if first <= warp_id < end:
                return name
        return None


def read_roles(path: Path) -> Roles:
    """Read a ``kernel_symbols.json``."""
    data = _json(path, "warp roles (kernel_symbols.json)")
    warps = data.get("warps", {}) if isinstance(data, dict) else None
    if not isinstance(warps, dict):
        raise ManifestError(f"{path} has no warps table", hint="give the kernel_symbols.json CuTe DSL wrote")
    roles: dict[str, tuple[int, int]] = {}
    for name, span in warps.items():
        if not jsonio.is_text(name):
            raise ManifestError(
                f"{path}: a role's name is not text", hint="give the kernel_symbols.json CuTe DSL wrote"
            )
        span = span if isinstance(span, dict) else {}
        first, end = span.get("warp_start"), span.get("warp_end")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (first, end)) or end <= first:
            raise ManifestError(f"{path}: role {name[:60]!r} has no warp_start < warp_end")
        if first < 0 or end > MAX_WARPS:
            raise ManifestError(
                f"{path}: role {name[:60]!r} names warps {first}..{end}, outside a CTA's {MAX_WARPS}",
                hint="give the kernel_symbols.json CuTe DSL wrote for this kernel",
            )
        roles[name] = (first, end)
    return Roles(roles, Path(path))


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str | None = None
    via: str | None = None


@dataclass(frozen=True)
class Dag:
    name: str
    edges: list[Edge]
    path: Path | None = None


def read_dag(path: Path) -> Dag:
    """Read a ``*.iket_dag.json``."""
    data = _json(path, "a DAG (*.iket_dag.json)")
    edges = data.get("edges") if isinstance(data, dict) else None
    if not isinstance(edges, list):
        raise ManifestError(f"{path} has no edges list", hint="give the file iket.dag(...).save() wrote")
    if len(edges) > MAX_EDGES:
        raise ManifestError(f"{path} has {len(edges):,} edges, more than the {MAX_EDGES:,} iket reads")
    found: dict[Edge, None] = {}  # each edge once, in the order given
    for number, edge in enumerate(edges):
        if not isinstance(edge, dict) or not all(jsonio.is_text(edge.get(k)) for k in ("source", "target")):
            raise ManifestError(f"{path}: edges[{number}] has no source and target region")
        label, via = (v if jsonio.is_text(v) else None for v in (edge.get("label"), edge.get("via")))
        found[Edge(edge["source"], edge["target"], label, via)] = None
    name = data.get("name") if jsonio.is_text(data.get("name")) else None
    return Dag(name or Path(path).name.removesuffix(DAG_SUFFIX), list(found), Path(path))


def capture_folder(location: Path) -> Path:
    """The folder a capture location (directory, manifest or trace file) lives in."""
    location = Path(location)
    return location if location.is_dir() else location.parent


def roles_for(location: Path, explicit: Path | None = None) -> Roles | None:
    """The warp roles of a capture: ``explicit`` (``--roles FILE``), else its own file."""
    if explicit is not None:
        return read_roles(explicit)
    found = capture_folder(location) / ROLES_NAME
    return read_roles(found) if found.is_file() else None


def dags_for(location: Path) -> list[Dag]:
    """The DAGs a capture holds (collected from the workload's dump folder)."""
    folder = capture_folder(location)
    return [read_dag(path) for path in sorted(folder.glob(f"*{DAG_SUFFIX}"))]


def _json(path: Path, what: str) -> Any:
    """The file's JSON, read only if it is a regular file (a FIFO is never waited on) of at most
    :data:`MAX_BYTES`."""
    try:
        return jsonio.read(path, MAX_BYTES)
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist", hint=f"give {what}") from None
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise ManifestError(f"{path} is not {what}: {error}") from None
