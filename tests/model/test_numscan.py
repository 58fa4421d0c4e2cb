"""The vectorised scanner against json.loads, on real traces and generated ones."""

from __future__ import annotations

import json
import mmap
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iket_cli.errors import ManifestError
from iket_cli.model import numscan, trace

from conftest import FIXTURES, launch_header

REAL = [
    FIXTURES / "affine" / "iket_pid_0x204.trace.json",
    FIXTURES / "multi" / "iket_pid_0x23f.trace.json",
    FIXTURES / "spawn" / "iket_pid_0x2b5.trace.json",
]
BIG = 2**63 - 1
timestamps = st.integers(0, BIG)
indices = st.integers(0, 2**31 - 1)


def compact(doc: dict) -> bytes:
    """The decoder's layout: sorted keys, no spaces."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def launch_doc(markers, ranges, warps) -> dict:
    return {
        **launch_header("k", 7),
        "markers": [
            {"color": c, "locIdx": loc, "markerNameIdx": n, "timestamp": t} for c, loc, n, t in markers
        ],
        "ranges": [
            {
                "endTs": end,
                "internalEvents": [{"eventId": e, "timestamp": t} for e, t in events],
                "rangeColor": 4294967295,
                "rangeId": 3124256359,
                "rangeNameIdx": name,
                "rangeScope": 0,
                "rangeType": 2,
                "startTs": start,
                "warpLocIdxs": locs,
            }
            for end, events, name, start, locs in ranges
        ],
        "warpLifetimes": [{"endTs": e, "locIdx": loc, "startTs": s} for e, loc, s in warps],
    }


def scan(doc: dict):
    data = compact(doc)
    body = data.index(b'"kernelName"')
    return numscan.launch_columns(data, body, len(data))


def expected(doc: dict) -> dict:
    return {
        "markers": {
            "loc": [m["locIdx"] for m in doc["markers"]],
            "name": [m["markerNameIdx"] for m in doc["markers"]],
            "start": [m["timestamp"] for m in doc["markers"]],
        },
        "ranges": {
            "end": [r["endTs"] for r in doc["ranges"]],
            "name": [r["rangeNameIdx"] for r in doc["ranges"]],
            "start": [r["startTs"] for r in doc["ranges"]],
            "loc": [(r["warpLocIdxs"] or [-1])[0] for r in doc["ranges"]],
            "kind": [r["rangeType"] for r in doc["ranges"]],
        },
        "warps": {
            "end": [w["endTs"] for w in doc["warpLifetimes"]],
            "loc": [w["locIdx"] for w in doc["warpLifetimes"]],
            "start": [w["startTs"] for w in doc["warpLifetimes"]],
        },
    }


def as_lists(columns: dict) -> dict:
    return {kind: {name: list(values) for name, values in named.items()} for kind, named in columns.items()}


#: numscan.SMALL for each of its two paths: every launch vectorised, or small launches by json.
PATHS = pytest.mark.parametrize("small", [0, numscan.SMALL], ids=["vectorised", "json"])


@PATHS
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.name)
def test_real_traces_take_the_vectorised_path(path, small, monkeypatch):
    monkeypatch.setattr(numscan, "SMALL", small)
    data = path.read_bytes()
    heads = list(trace._LAUNCH.finditer(data))
    assert heads
    for number, head in enumerate(heads):
        end = heads[number + 1].start() if number + 1 < len(heads) else data.rfind(trace._TABLES)
        assert numscan.launch_columns(data, head.end(), end) is not None, "the decoder's layout is read"
    fast = trace.load(path)
    monkeypatch.setattr(numscan, "launch_columns", lambda *args: None)
    assert fast.launches == trace.load(path).launches == trace._from_json(path).launches


marker = st.tuples(st.sampled_from([0, 4294967295]), indices, indices, timestamps)
range_record = st.tuples(
    timestamps,
    st.lists(st.tuples(st.integers(0, 40), timestamps), max_size=3),
    indices,
    timestamps,
    st.lists(indices, max_size=3),
)
warp = st.tuples(timestamps, indices, timestamps)


@PATHS
@settings(max_examples=80, deadline=None)
@given(
    st.lists(marker, max_size=12),
    st.lists(range_record, max_size=12),
    st.lists(warp, max_size=6),
    st.sampled_from([16, 64, 1 << 23]),
)
def test_generated_launches_match_json(small, markers, ranges, warps, chunk):
    """Any number of internal events and warp locations, timestamps up to 2**63-1, and
    chunks small enough that records straddle every boundary."""
    doc = launch_doc(markers, ranges, warps)
    saved = numscan.CHUNK, numscan.SMALL
    numscan.CHUNK, numscan.SMALL = chunk, small
    try:
        columns = scan(doc)
    finally:
        numscan.CHUNK, numscan.SMALL = saved
    assert columns is not None
    assert as_lists(columns) == expected(doc)
    assert all(isinstance(v, array) for named in columns.values() for v in named.values())


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["markers"][0].update(timestamp=1.5),
        lambda d: d["markers"][0].update(timestamp=-32),
        lambda d: d["markers"][0].update(extra=3),
        lambda d: d["ranges"][0].update(startTs=2**64),
        lambda d: d["ranges"][0].update(rangeNameIdx=2**40),
        lambda d: d["ranges"][0].update(Comment=1),
        lambda d: d["warpLifetimes"][0].update(locIdx=1e3),
        lambda d: d["ranges"][0].pop("rangeColor"),
    ],
    ids=[
        "float",
        "negative",
        "extra-key",
        "wider-than-int64",
        "wide-index",
        "capital-key",
        "exponent",
        "missing-key",
    ],
)
@PATHS
def test_other_layouts_fall_back(change, small, tmp_path, monkeypatch):
    """The scanner declines; trace.load then gives json.load's model, or its one-line error."""
    monkeypatch.setattr(numscan, "SMALL", small)
    doc = launch_doc([(0, 1, 2, 3)], [(10, [(2, 4)], 0, 4, [1, 1])], [(20, 1, 0)])
    change(doc)
    assert scan(doc) is None
    whole = {
        "graphLaunches": {},
        "launches": [doc],
        "locationTable": [
            {"ctaId": [0, 0, 0], "gpcId": 0, "smId": 0, "tpcId": 0, "warpId": w} for w in range(5)
        ],
        "meta": {"version": 1},
        "stringTable": ["a", "b", "c", "d", "e"],
    }
    path = tmp_path / "odd.trace.json"
    path.write_bytes(compact(whole))
    try:
        general = trace._from_json(path)
    except ManifestError as error:
        with pytest.raises(ManifestError, match="is not an IKET trace") as raised:
            trace.load(path)
        assert str(raised.value) == str(error)
    else:
        assert trace.load(path).launches == general.launches


@pytest.mark.parametrize("at", [0, 5, 15, 16, 17, 40])
def test_windowed_find_crosses_window_edges(at, monkeypatch, tmp_path):
    monkeypatch.setattr(numscan, "CHUNK", 16)
    needle = b'{"blockDimX":'
    data = b"x" * at + needle + b"y" * 30
    assert numscan.find(data, needle, 0, len(data)) == at
    path = tmp_path / "f"
    path.write_bytes(data)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert numscan.find(mapped, needle, 0, len(data)) == at
        assert numscan.find(mapped, b"zz", 0, len(data)) == -1
