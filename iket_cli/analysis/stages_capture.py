"""``iket show --pipeline`` of a whole capture: each trace's kernels with a DAG or warp
roles, their stages (:mod:`.stages`), and the two ways asking for it can go wrong."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from ..errors import UsageError
from ..model import annotations
from ..model.reading import Opened
from ..model.trace import Trace
from . import stages


def pipelines_capture(opened: Opened, roles_file: Path | None, wait_pattern: str) -> list[tuple[str, list]]:
    """``[(process label, [pipeline, ...])]`` for each trace of ``opened`` (its filters applied)
    with stages; ranges whose name matches ``wait_pattern`` are waiting, not work."""
    found = []
    for seen, loaded in opened.traces():
        _some_work(loaded, wait_pattern)
        roles = annotations.roles_for(seen.path, roles_file)
        pipes = stages.pipelines(loaded, annotations.dags_for(seen.path), roles, wait_pattern)
        if pipes:
            found.append((seen.label, pipes))
    if not found:
        raise UsageError(
            f"no kernel in {opened.location} has stages: it has no DAG (*.iket_dag.json) and no warp roles",
            hint="write the DAG with iket.dag(name) in CuTe DSL, or give --roles kernel_symbols.json",
        )
    return found


def _some_work(loaded: Trace, wait_pattern: str) -> None:
    """A wait pattern that every range matches leaves no work to bound a pipeline (exit 2)."""
    used = {int(i) for launch in loaded.launches for i in set(launch.ranges.name)}
    names = [loaded.name(i) for i in used]
    if names and all(fnmatch.fnmatchcase(name, wait_pattern) for name in names):
        raise UsageError(
            f"--wait-pattern {wait_pattern!r} matches every range, so no stage does any work",
            hint="match only the ranges that wait (the default is wait*)",
        )
