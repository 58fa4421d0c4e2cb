"""Pooling the traces of a process's repeats into one (model.pooling): every range, mark and
warp keeps its name and location through the joined tables."""

from __future__ import annotations

from iket_cli.model import pooling
from iket_cli.model import trace as trace_mod

from conftest import FIXTURES


def records(trace: trace_mod.Trace) -> list[tuple]:
    """Every record by what it means, not by its indices: kind, kernel, name, place, times."""
    found = []
    for launch in trace.launches:
        for kind, columns in (("range", launch.ranges), ("mark", launch.markers), ("warp", launch.warps)):
            for i in range(len(columns)):
                name = trace.name(columns.name[i]) if kind != "warp" else ""
                loc = columns.loc[i]
                where = trace.locations[loc] if 0 <= loc < len(trace.locations) else None
                place = None if where is None else (tuple(where["ctaId"]), where["warpId"], where["smId"])
                end = columns.end[i] if i < len(columns.end) else None  # a mark has no end
                found.append((kind, launch.kernel, name, place, columns.start[i], end))
    return found


def test_pooled_traces_keep_every_record_as_it_was():
    affine = trace_mod.load(FIXTURES / "affine" / "iket_pid_0x204.trace.json")
    multi = trace_mod.load(FIXTURES / "multi" / "iket_pid_0x23f.trace.json")
    pooled = pooling.pooled([affine, multi, affine])
    assert records(pooled) == records(affine) + records(multi) + records(affine)
    assert len(pooled.strings) == len(set(affine.strings) | set(multi.strings)), "each name once"
    assert len(pooled.launches) == 2 * len(affine.launches) + len(multi.launches)
    assert records(affine) == records(trace_mod.load(FIXTURES / "affine" / "iket_pid_0x204.trace.json")), (
        "the traces pooled are left as they were"
    )
    # the same warp on another SM, its names in another order: both tables must be translated
    moved = trace_mod.Trace(
        affine.path, affine.launches, affine.strings[::-1], [{**affine.locations[0], "smId": 7}]
    )
    for launch in moved.launches:
        launch.ranges.name = type(launch.ranges.name)("i", [1 - i for i in launch.ranges.name])
        launch.markers.name = type(launch.markers.name)("i", [1 - i for i in launch.markers.name])
    assert records(pooling.pooled([multi, moved])) == records(multi) + records(moved)


def test_one_trace_is_itself():
    affine = trace_mod.load(FIXTURES / "affine" / "iket_pid_0x204.trace.json")
    assert pooling.pooled([affine]) is affine
