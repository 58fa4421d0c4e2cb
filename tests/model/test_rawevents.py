"""The raw capture's event counts (iket_cli.model.rawevents) against H200 captures: equal to
the decoded trace where everything paired, above it by exactly what the probe left open, and
no answer at all where the raw layout is not the one it knows."""

from __future__ import annotations

import json
import shutil
import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from iket_cli.model import rawevents

from conftest import FIXTURES

RAW = {p.parts[-4]: p for p in sorted(FIXTURES.glob("*/iket/pid_*/iket.data.json"))}


def decoded(folder: Path) -> dict[str, Counter]:
    """Per kernel: (name, rangeType or 'mark') -> count, from the trace JSON alone."""
    doc = json.loads(next(folder.glob("*.trace.json")).read_text())
    found: dict[str, Counter] = {}
    for launch in doc["launches"]:
        counts = found.setdefault(launch["kernelName"], Counter())
        for r in launch["ranges"]:
            counts[(doc["stringTable"][r["rangeNameIdx"]], r["rangeType"])] += 1
        for m in launch["markers"]:
            counts[(doc["stringTable"][m["markerNameIdx"]], "mark")] += 1
    return found


def expected(counts: Counter) -> Counter:
    """The raw events a fully paired trace implies: two per token range, a push and a pop per
    push/pop range, one per mark."""
    raw: Counter = Counter()
    for (name, kind), n in counts.items():
        if kind == 1:
            raw[(name, rawevents.START_END)] += 2 * n
        elif kind == 2:
            raw[(name, rawevents.PUSH)] += n
            raw[("pop_range", rawevents.POP)] += n
        else:
            raw[(name, rawevents.MARK)] += n
    return raw


@pytest.mark.parametrize("name", ["affine", "multi", "cute_affine", "cute_pipeline"])
def test_a_paired_capture_counts_what_the_trace_decoded(name):
    counted = rawevents.read(RAW[name])
    assert counted is not None and counted.full_warps == 0
    for kernel, counts in decoded(FIXTURES / name).items():
        assert counted.kernels[kernel] == expected(counts), kernel


def test_the_probe_counts_the_ranges_the_decoder_dropped():
    """scripts/cute_unmatched.py on the H200: warp 0 of both CTAs left 'open' and 'dangling'."""
    counted = rawevents.read(RAW["cute_unmatched"])
    (kernel,) = counted.kernels
    assert counted.kernels[kernel] - expected(decoded(FIXTURES / "cute_unmatched")[kernel]) == Counter(
        {("open", rawevents.START_END): 2, ("dangling", rawevents.PUSH): 2}
    )


def damage(tmp_path: Path, name: str, how) -> Path:
    folder = tmp_path / name
    shutil.copytree(RAW[name].parent, folder)
    how(folder / "iket.data.json", folder / "iket.data.bin")
    return folder / "iket.data.json"


def _bin(edit):
    def how(_manifest: Path, data: Path) -> None:
        data.write_bytes(edit(bytearray(data.read_bytes())))

    return how


def _manifest(edit):
    def how(manifest: Path, _data: Path) -> None:
        doc = json.loads(manifest.read_text())
        edit(doc)
        manifest.write_text(json.dumps(doc))

    return how


def _unknown_id(data: bytearray) -> bytearray:
    data[16] = (data[16] & ~0x1F) | 0x1D  # warp 0's first event: an id no event has
    return data


def _odd_length(data: bytearray) -> bytearray:
    struct.pack_into("<I", data, 0, struct.unpack_from("<I", data, 0)[0] + 2)
    return data


def _wide_payloads(doc: dict) -> None:
    for context in doc["decodeContexts"].values():
        for event in context["events"]:
            if event["payloadType"]:
                event["payloadType"] = 7  # i64: two words each, so the events no longer line up


def _many_names(doc: dict) -> None:
    for context in doc["decodeContexts"].values():
        context["metaInfo"]["maxEventId"] = 63


def _event(**change) -> Callable[[dict], None]:
    def apply(doc: dict) -> None:
        for context in doc["decodeContexts"].values():
            context["events"][0].update(change)

    return apply


@pytest.mark.parametrize(
    "how",
    [
        _manifest(_event(eventName=1.5)),  # issue 31: the lint then failed sorting the names
        _manifest(_event(eventPosition="start")),
        _manifest(_event(eventId=2**40)),
        _bin(_unknown_id),
        _bin(_odd_length),
        _bin(lambda data: data[:-8]),
        _manifest(_wide_payloads),
        _manifest(_many_names),
        lambda manifest, _data: manifest.write_text("{not json"),
        lambda _manifest, data: data.unlink(),
    ],
    ids=[
        "number-name",
        "text-position",
        "huge-id",
        "unknown-id",
        "odd-length",
        "truncated",
        "wide-payloads",
        "many-names",
        "bad-json",
        "no-bin",
    ],
)
def test_a_layout_it_does_not_know_gives_no_answer(tmp_path, how):
    assert rawevents.read(damage(tmp_path, "cute_unmatched", how)) is None
    assert rawevents.read(tmp_path / "nowhere" / "iket.data.json") is None
