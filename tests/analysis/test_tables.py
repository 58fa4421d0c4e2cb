"""A capture's tables (analysis.tables) against an independent recount from the JSON traces
(``json.load``, nothing of iket's reader), on H200 captures: one process, two processes, a
warp trace, a PyTorch warp trace; and the markers' enclosing ranges against iket show."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from iket_cli.analysis import summary, tables
from iket_cli.model.folder import find_traces
from iket_cli.model.reading import open_capture

from conftest import FIXTURES

pytest.importorskip("pyarrow")


def recount(location: Path) -> dict:
    """Row counts and some values per table, from the traces as plain JSON."""
    counts = Counter()
    rows: dict[str, list] = {"launches": [], "warps": [], "ranges": [], "markers": []}
    for _, path in find_traces(location):
        doc = json.loads(path.read_text())
        names, places = doc["stringTable"], doc["locationTable"]
        counts["processes"] += 1
        for number, launch in enumerate(doc["launches"]):
            lifetimes = launch["warpLifetimes"]
            span = (
                max(w["endTs"] for w in lifetimes) - min(w["startTs"] for w in lifetimes)
                if lifetimes
                else None
            )
            grid = (launch["gridDimX"], launch["gridDimY"], launch["gridDimZ"])
            rows["launches"].append((number, launch["kernelName"], grid, span, len(lifetimes)))
            for w in lifetimes:
                where = places[w["locIdx"]]
                rows["warps"].append(
                    (number, where["smId"], tuple(where["ctaId"]), where["warpId"], w["startTs"])
                )
            for r in launch["ranges"]:
                where = places[r["warpLocIdxs"][0]] if r["warpLocIdxs"] else {}
                rows["ranges"].append(
                    (number, names[r["rangeNameIdx"]], where.get("smId"), r["endTs"] - r["startTs"])
                )
            for m in launch["markers"]:
                where = places[m["locIdx"]] if 0 <= m["locIdx"] < len(places) else {}
                rows["markers"].append(
                    (number, names[m["markerNameIdx"]], where.get("warpId"), m["timestamp"])
                )
    counts.update({name: len(found) for name, found in rows.items()})
    return {"counts": counts, "rows": rows}


def ours(location: Path) -> dict:
    built = tables.build(open_capture(location))
    counts = Counter({name: table.num_rows for name, table in built.items() if name != "kernels"})
    launches = built["launches"].to_pylist()
    rows = {
        "launches": [
            (r["launch"], r["kernel"], (r["grid_x"], r["grid_y"], r["grid_z"]), r["span_ns"], r["warps"])
            for r in launches
        ],
        "warps": [
            (r["launch"], r["sm"], (r["cta_x"], r["cta_y"], r["cta_z"]), r["warp"], r["start_ts"])
            for r in built["warps"].to_pylist()
        ],
        "ranges": [(r["launch"], r["name"], r["sm"], r["duration_ns"]) for r in built["ranges"].to_pylist()],
        "markers": [(r["launch"], r["name"], r["warp"], r["ts"]) for r in built["markers"].to_pylist()],
    }
    return {"counts": counts, "rows": rows, "tables": built}


@pytest.mark.parametrize("name", ["multi", "spawn", "warp_multi", "affine"])
def test_every_table_matches_a_recount(name):
    expected, found = recount(FIXTURES / name), ours(FIXTURES / name)
    assert found["counts"] == expected["counts"]
    for table, rows in expected["rows"].items():
        assert sorted(found["rows"][table], key=repr) == sorted(rows, key=repr), table
    kernels = found["tables"]["kernels"].to_pylist()
    assert sum(k["launches"] for k in kernels) == expected["counts"]["launches"]
    assert sum(k["ranges"] for k in kernels) == expected["counts"]["ranges"]


def test_a_pytorch_warp_trace(torch_warp):
    expected, found = recount(torch_warp), ours(torch_warp)
    assert found["counts"] == expected["counts"] and expected["counts"]["warps"] > 100_000
    assert sorted(found["rows"]["launches"], key=repr) == sorted(expected["rows"]["launches"], key=repr)


def test_markers_know_their_range_as_show_does():
    built = tables.build(open_capture(FIXTURES / "multi"))
    markers = built["markers"].to_pylist()
    ranges = {r["id"]: r for r in built["ranges"].to_pylist()}
    for mark in markers:
        held = ranges[mark["range_id"]]
        assert held["start_ts"] <= mark["ts"] <= held["end_ts"] and held["warp"] == mark["warp"]
        assert mark["offset_ns"] == mark["ts"] - held["start_ts"] and mark["range_name"] == held["name"]
    (process,) = summary.summarize_capture(open_capture(FIXTURES / "multi"))
    for kernel in process["kernels"]:
        for row in kernel.markers:
            offsets = sorted(
                m["offset_ns"]
                for m in markers
                if m["name"] == row.name and m["launch"] in _launches(built, kernel)
            )
            assert row.offset_from_range.count == len(offsets)
            assert row.offset_from_range.p50 == offsets[(len(offsets) + 1) // 2 - 1], "nearest-rank median"


def _launches(built, kernel) -> set[int]:
    return {r["launch"] for r in built["launches"].to_pylist() if r["kernel"] == kernel.kernel}


def test_depth_of_nested_and_sibling_ranges():
    import numpy as np

    # one warp: a parent holding two children, the second zero-length at the same instant as
    # a later sibling (trace order is push order); then a token range
    start = np.array([0, 0, 64, 64, 200, 0])
    end = np.array([160, 64, 64, 96, 232, 300])
    loc = np.zeros(6, np.int64)
    stack = np.array([True, True, True, True, True, False])
    assert list(tables.depths(loc, start, end, stack)) == [0, 1, 1, 1, 0, 0]
    other = np.ones(6, np.int64)  # the same ranges in another warp: depths of their own
    both = tables.depths(np.concatenate([loc, other]), np.tile(start, 2), np.tile(end, 2), np.tile(stack, 2))
    assert list(both) == [0, 1, 1, 1, 0, 0] * 2
