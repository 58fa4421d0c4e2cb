"""The Perfetto trace written from the trace JSON alone, against NVIDIA's own export of the
same capture: every fixture with both files, and captures decoded here by the real decoder
(CUDA graph replays, launches that lost every record, many warps)."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from iket_cli.model import trace as trace_mod
from iket_cli.render import perfetto

from conftest import FIXTURES, perfetto_view, run_iket

#: Fixtures that hold NVIDIA's .pftrace beside the trace JSON of the same decode.
BOTH = sorted(
    p for p in FIXTURES.glob("*/*.pftrace") if p.with_suffix("").with_suffix(".trace.json").is_file()
)
#: Raw captures decoded here by NVIDIA's decoder (graph replays; every record lost; 8 warps a CTA).
RAW = ["loss_graph", "loss_budget", "loss_multi", "warp_multi"]


def events(data: bytes) -> Counter:
    """Every event as (track path, timestamp, type, name, annotations), the end events' too
    (which :func:`perfetto_view` pairs and does not show)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    trace = Trace.FromString(data)
    names = {
        p.track_descriptor.uuid: (p.track_descriptor.name, p.track_descriptor.parent_uuid)
        for p in trace.packet
        if p.HasField("track_descriptor")
    }

    def path(uuid: int) -> tuple[str, ...]:
        out = []
        while uuid in names:
            name, uuid = names[uuid]
            out.append(name)
        return tuple(reversed(out))

    return Counter(
        (
            path(p.track_event.track_uuid),
            p.timestamp,
            p.track_event.type,
            p.track_event.name,
            tuple(a.SerializeToString() for a in p.track_event.debug_annotations),
        )
        for p in trace.packet
        if p.HasField("track_event")
    )


def same_trace(theirs: bytes, ours: bytes) -> None:
    assert perfetto_view(ours) == perfetto_view(theirs)
    assert events(ours) == events(theirs)


@pytest.mark.parametrize("pftrace", BOTH, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_same_trace_as_nvidias_export(pftrace: Path):
    trace = trace_mod.load(pftrace.with_suffix("").with_suffix(".trace.json"))
    same_trace(pftrace.read_bytes(), perfetto.encode(trace))


@pytest.fixture(scope="module")
def decoded(tmp_path_factory) -> Path:
    """The raw captures of :data:`RAW` decoded by NVIDIA's decoder through ``iket postprocess``."""
    root = tmp_path_factory.mktemp("decoded")
    for name in RAW:
        shutil.copytree(FIXTURES / name, root / name)
        done = run_iket("postprocess", root / name, "--format", "all", cwd=root)
        assert done.code == 0, done
    return root


@pytest.mark.parametrize("name", RAW)
def test_the_same_trace_for_what_the_decoder_exports_here(decoded: Path, name: str):
    (pftrace,) = (decoded / name).glob("*.pftrace")
    trace = trace_mod.load(pftrace.with_suffix("").with_suffix(".trace.json"))
    ours = perfetto.encode(trace)
    same_trace(pftrace.read_bytes(), ours)
    if name == "loss_graph":  # the replays are tracks of their own, in the order they ran
        tracks = {path[:2] for path, *_ in perfetto_view(ours)[0]}
        assert {("Root", f"GraphExec2 Launch{k}") for k in range(3)} <= tracks
        assert {("Root", "Grid1"), ("Root", "Grid5")} <= tracks
    if name == "loss_budget":  # nothing recorded: nothing but the root
        assert perfetto_view(ours)[0] == Counter({(("Root",), 0, 3): 1})


def test_nested_ranges_that_start_or_end_together_stay_nested(tmp_path):
    """Perfetto pairs a track's begins and ends by time, then by their order: an enclosing range
    that starts with its first child and ends with its last must be written around them."""
    from conftest import write_trace

    path = tmp_path / "iket_pid_0x1.trace.json"
    # as the decoder lists them: by pop, the inner ones first
    ranges = [(0, 0, 0, 10), (0, 0, 10, 30), (1, 0, 0, 30)]
    write_trace(path, ["inner", "outer"], [{"kernel": "k", "ranges": ranges, "warps": [(0, 0, 30)]}])
    slices = perfetto_view(perfetto.encode(trace_mod.load(path)))[1]
    stacked = sorted((k[1], k[2], k[3]) for k in slices if k[0][-1] == "StackedRanges" and k[1] != "unclosed")
    assert stacked == [("inner", 0, 10), ("inner", 10, 20), ("outer", 0, 30)]
