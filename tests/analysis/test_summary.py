"""Property tests: the summary of generated traces against a deliberately plain reference."""

from __future__ import annotations

import json
import math
import tempfile
from collections import defaultdict
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from iket_cli.analysis import enclosing, launch_parts, summary
from iket_cli.model import trace

from conftest import FIXTURES, run_iket, write_trace

NAMES = ["mainloop", "epilogue", "load", "mark_a", "mark_b"]
STEP = 32


@st.composite
def traces(draw):
    """Launches of warps, each running non-overlapping top-level ranges with marks inside."""
    launches = []
    for _number in range(draw(st.integers(1, 3))):
        kernel = draw(st.sampled_from(["gemm", "reduce"]))
        ranges, markers, warps = [], [], []
        for loc in range(draw(st.integers(1, 4))):
            t = draw(st.integers(0, 50)) * STEP
            start = t
            for _ in range(draw(st.integers(0, 6))):
                length = draw(st.integers(0, 40)) * STEP
                ranges.append((draw(st.integers(0, 2)), loc, t, t + length))
                if draw(st.booleans()):
                    markers.append(
                        (draw(st.integers(3, 4)), loc, t + draw(st.integers(0, length // STEP)) * STEP)
                    )
                t += length + draw(st.integers(1, 5)) * STEP
            warps.append((loc, start, t))
        launches.append({"kernel": kernel, "ranges": ranges, "markers": markers, "warps": warps})
    return launches


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def reference(doc: dict) -> dict:
    """The plain way: dicts and loops over json.load's output."""
    result = {}
    durations, offsets, warp_time = defaultdict(list), defaultdict(list), defaultdict(int)
    for launch in doc["launches"]:
        kernel = launch["kernelName"]
        for w in launch["warpLifetimes"]:
            warp_time[kernel] += w["endTs"] - w["startTs"]
        for r in launch["ranges"]:
            durations[(kernel, doc["stringTable"][r["rangeNameIdx"]])].append(r["endTs"] - r["startTs"])
        for m in launch["markers"]:
            holders = [
                r
                for r in launch["ranges"]
                if r["warpLocIdxs"][0] == m["locIdx"] and r["startTs"] <= m["timestamp"] <= r["endTs"]
            ]
            if holders:
                inner = max(holders, key=lambda r: r["startTs"])
                offsets[(kernel, doc["stringTable"][m["markerNameIdx"]])].append(
                    m["timestamp"] - inner["startTs"]
                )
    for (kernel, name), values in durations.items():
        share = sum(values) / warp_time[kernel] if warp_time[kernel] else None
        result[(kernel, name)] = (
            len(values),
            sum(values),
            min(values),
            max(values),
            pct(values, 0.5),
            pct(values, 0.9),
            pct(values, 0.99),
            share,
        )
    for key, values in offsets.items():
        result[("mark", *key)] = (len(values), pct(values, 0.5), pct(values, 0.9))
    return result


def ours(loaded) -> dict:
    result = {}
    for kernel in summary.summarize(loaded):
        for row in kernel.ranges:
            d = row.durations
            result[(kernel.kernel, row.name)] = (
                d.count,
                d.total,
                d.min,
                d.max,
                d.p50,
                d.p90,
                d.p99,
                row.share_of_warp_time,
            )
        for mark in kernel.markers:
            if mark.offset_from_range:
                o = mark.offset_from_range
                result[("mark", kernel.kernel, mark.name)] = (o.count, o.p50, o.p90)
    return result


@settings(max_examples=60, deadline=None)
@given(traces())
def test_summary_matches_the_plain_reference(launches):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.trace.json"
        write_trace(path, NAMES, launches, locations=4)
        loaded = trace.load(path)
        assert loaded.launches == trace._from_json(path).launches
        assert ours(loaded) == reference(json.loads(path.read_text()))


@st.composite
def overlapping(draw):
    """One launch whose warps hold nested, crossing, zero-length and duplicate ranges."""
    launch = trace.Launch("k", (1, 1, 1), (32, 1, 1), 1)
    for _ in range(draw(st.integers(0, 30))):
        start = draw(st.integers(0, 20)) * STEP
        end = start + draw(st.integers(0, 10)) * STEP
        launch.ranges.name.append(0)
        launch.ranges.loc.append(draw(st.integers(-1, 2)))
        launch.ranges.start.append(start + 10**18)
        launch.ranges.end.append(end + 10**18)
    for _ in range(draw(st.integers(0, 30))):
        launch.markers.name.append(draw(st.integers(3, 4)))
        launch.markers.loc.append(draw(st.integers(-1, 2)))
        launch.markers.start.append(draw(st.integers(0, 32)) * STEP + 10**18)
    return launch


def brute_offsets(launch) -> dict[int, list[int]]:
    """Each mark against every range of its warp: the latest start among those holding it."""
    found = defaultdict(list)
    r, m = launch.ranges, launch.markers
    for loc, ts, name in zip(m.loc, m.start, m.name, strict=True):
        starts = [s for at, s, e in zip(r.loc, r.start, r.end, strict=True) if at == loc and s <= ts <= e]
        if starts:
            found[name].append(ts - max(starts))
    return {name: sorted(values) for name, values in found.items()}


def flattened(offsets) -> dict[int, list[int]]:
    return {name: sorted(int(v) for part in parts for v in part) for name, parts in offsets.items()}


@settings(max_examples=200, deadline=None)
@given(overlapping())
def test_mark_offsets_vectorised_equals_the_sweep_and_brute_force(launch):
    vectorised = defaultdict(list)
    launch_parts._mark_offsets(launch, vectorised)
    swept = held_offsets(launch, enclosing._swept(launch))
    direct = held_offsets(launch, enclosing.innermost(launch))
    assert flattened(vectorised) == swept == direct == brute_offsets(launch)


@st.composite
def decoder_ordered(draw):
    """An :func:`overlapping` launch with its ranges as the decoder writes them: warp by warp,
    the warps in any order of their location numbers (a later launch's CTAs on other SMs),
    each warp's by start, an outer range before those it holds."""
    launch = draw(overlapping())
    r = launch.ranges
    warps = draw(st.permutations(sorted(set(r.loc))))
    rows = sorted(range(len(r.loc)), key=lambda i: (warps.index(r.loc[i]), r.start[i], -r.end[i]))
    ordered = trace.Launch("k", (1, 1, 1), (32, 1, 1), 1)
    for row in rows:
        for column in ("name", "loc", "start", "end"):
            getattr(ordered.ranges, column).append(getattr(r, column)[row])
    ordered.markers = launch.markers
    return ordered


def innermost_by_hand(launch) -> dict[int, int]:
    """Each mark's holder against every range of its warp: the latest start holding it, then
    the later in the trace (of a range and one it holds, or of two siblings, that start on
    one timer tick, the decoder writes the outer or the earlier first)."""
    r, m = launch.ranges, launch.markers
    expected = {}
    for mark, (loc, ts) in enumerate(zip(m.loc, m.start, strict=True)):
        rows = zip(range(len(r.loc)), r.loc, r.start, r.end, strict=True)
        holding = [(start, row) for row, at, start, end in rows if at == loc and start <= ts <= end]
        if holding:
            expected[mark] = max(holding)[1]
    return expected


def holders(pairs) -> dict[int, int]:
    return {int(mark): int(held) for mark, held in zip(*pairs, strict=True)}


@settings(max_examples=300, deadline=None)
@given(overlapping())
def test_of_ranges_starting_at_once_the_later_in_the_trace_holds_the_mark(launch):
    expected = innermost_by_hand(launch)
    assert holders(enclosing.innermost(launch)) == expected
    assert holders(enclosing._swept(launch)) == expected


@settings(max_examples=300, deadline=None)
@given(decoder_ordered())
def test_ranges_in_the_decoders_order_are_not_sorted_again(launch):
    """Warp by warp in any order of location numbers: no sort (it was 30 ms a launch)."""
    with mock.patch("numpy.argsort", side_effect=AssertionError("sorted again")):
        found = holders(enclosing.innermost(launch))
    assert found == innermost_by_hand(launch)


def held_offsets(launch, pairs) -> dict[int, list[int]]:
    """Offsets from the ranges :mod:`iket_cli.analysis.enclosing` says hold each mark."""
    found = defaultdict(list)
    for mark, held in zip(*pairs, strict=True):
        assert launch.ranges.loc[held] == launch.markers.loc[mark], "a range of the mark's warp"
        found[launch.markers.name[mark]].append(launch.markers.start[mark] - launch.ranges.start[held])
    return {name: sorted(values) for name, values in found.items()}


def test_each_range_says_push_pop_or_start_end(tmp_path):
    """Issue 33, item 3: the range type, recounted from the trace JSON's rangeType."""
    path = FIXTURES / "cute_pipeline" / "iket_pid_0xfc5.trace.json"
    doc = json.loads(path.read_text())
    types: dict[str, set] = defaultdict(set)
    for launch in doc["launches"]:
        for r in launch["ranges"]:
            types[doc["stringTable"][r["rangeNameIdx"]]].add({1: "start/end", 2: "push/pop"}[r["rangeType"]])
    shown = run_iket("show", path, "--format", "json", cwd=tmp_path)
    rows = {
        row["name"]: row["range_type"]
        for process in json.loads(shown.stdout)["processes"]
        for kernel in process["kernels"]
        for row in kernel["ranges"]
    }
    assert rows == {name: "+".join(sorted(kinds)) for name, kinds in types.items()}
    assert set(rows.values()) == {"start/end", "push/pop"}, "the fixture has both kinds"
    table = run_iket("show", path, cwd=tmp_path)
    assert (
        "│ reduce          │ push/pop  │" in table.stdout
        and "│ load            │ start/end │" in table.stdout
    )


def test_a_range_name_that_matches_nothing_is_a_usage_error_listing_the_names(tmp_path):
    """``--range`` that names no range used to print an orphan mark row and exit 0."""
    result = run_iket("show", FIXTURES / "affine", "--range", "nosuch", cwd=tmp_path)
    assert result.code == 2, result
    assert "no range named 'nosuch'" in result.stderr and "its ranges: affine" in result.stderr
    assert result.stdout == ""
    found = run_iket("show", FIXTURES / "affine", "--range", "affine", cwd=tmp_path)
    assert found.code == 0 and "affine" in found.stdout
