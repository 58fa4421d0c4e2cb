"""The ``flows`` and ``stages`` tables of ``iket export`` and ``iket sql`` (docs/schema.md).

``flows``: one row per DAG arrow (every arrow, no cap), with ``source_id`` and ``target_id``
the ``ranges`` table's ids of the two ranges, and the lag between them. ``stages``: one row per
stage of a kernel, the figures of ``iket show --pipeline`` (:mod:`.stages`). Both are built
per trace from its DAGs and warp roles; a trace without them adds no rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model.annotations import dags_for, roles_for
from ..model.trace import Trace
from . import flows as flows_mod
from . import stages as stages_mod


def flows_table(pa, where: dict[str, Any], trace: Trace, path: Path, first_ids: list[int]):
    """The arrows of one trace; ``first_ids``: each launch's first id in the ``ranges`` table."""
    import numpy as np

    dags = dags_for(path)
    paired = flows_mod.pair(trace, dags) if dags else flows_mod.Pairing()
    labels = [f"{edge.source} -> {edge.target}" for dag in dags for edge in dag.edges] or [""]
    n = len(paired)
    launch = paired.launch if n else np.zeros(0, np.int64)
    source = paired.source if n else np.zeros(0, np.int64)
    target = paired.target if n else np.zeros(0, np.int64)
    edge = paired.edge if n else np.zeros(0, np.int64)
    firsts = np.asarray(first_ids or [0], dtype=np.int64)
    starts = {i: np.asarray(one.ranges.start, np.int64) for i, one in enumerate(trace.launches)}
    ends = {i: np.asarray(one.ranges.end, np.int64) for i, one in enumerate(trace.launches)}
    lag = np.zeros(n, np.int64)
    for number in np.unique(launch):
        rows = launch == number
        lag[rows] = starts[int(number)][target[rows]] - ends[int(number)][source[rows]]
    return pa.table(
        {
            "capture": pa.array([where["capture"]] * n, pa.string()),
            "process": pa.array([where["process"]] * n, pa.string()),
            "launch": pa.array(launch.astype(np.int32), pa.int32()),
            "edge": pa.DictionaryArray.from_arrays(
                pa.array(edge.astype(np.int32)), pa.array(labels, pa.string())
            ),
            "source_id": pa.array(firsts[launch] + source if n else source),
            "target_id": pa.array(firsts[launch] + target if n else target),
            "lag_ns": pa.array(lag),
        }
    )


def stages_table(pa, where: dict[str, Any], trace: Trace, path: Path):
    """One row per stage of each kernel of one trace, with its kernel's fill, drain and bound."""
    roles = roles_for(path)
    rows: dict[str, list] = {
        name: [] for name in ("kernel", *stages_mod.STAGE_COLUMNS, "bound", "fill_ns", "drain_ns")
    }
    for pipe in stages_mod.pipelines(trace, dags_for(path), roles):
        for stage in pipe.stages:
            rows["kernel"].append(pipe.kernel)
            for column in stages_mod.STAGE_COLUMNS:
                rows[column].append(getattr(stage, "name" if column == "stage" else column))
            rows["bound"].append(stage.name == pipe.bound)
            rows["fill_ns"].append(pipe.fill_ns)
            rows["drain_ns"].append(pipe.drain_ns)
    n = len(rows["kernel"])
    types = {"instances": pa.int64(), "warps": pa.int64(), "bound": pa.bool_()}
    text = ("kernel", "stage", "role")
    return pa.table(
        {
            "capture": pa.array([where["capture"]] * n, pa.string()),
            "process": pa.array([where["process"]] * n, pa.string()),
            **{
                name: pa.array(values, pa.string() if name in text else types.get(name, pa.float64()))
                for name, values in rows.items()
            },
        }
    )
