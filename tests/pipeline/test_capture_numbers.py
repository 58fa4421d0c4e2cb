"""``Capture.ranges()`` and ``Capture.range(name)``: the numbers a notebook or a test asserts
on, against an independent recount from the trace JSON (``json.load``, nearest rank)."""

from __future__ import annotations

import json
import math

import pytest

from iket_cli import Capture
from iket_cli.errors import UsageError

from conftest import FIXTURES


def recount(folder, name, kernel=None):
    durations = []
    for path in folder.glob("iket_pid_*.trace.json"):
        trace = json.loads(path.read_text())
        for launch in trace["launches"]:
            if kernel and kernel not in launch["kernelName"]:
                continue
            durations += [r["endTs"] - r["startTs"] for r in launch["ranges"]
                          if trace["stringTable"][r["rangeNameIdx"]] == name]  # fmt: skip
    durations.sort()
    return durations


def rank(values, q):
    return values[max(math.ceil(q * len(values)) - 1, 0)]


@pytest.mark.parametrize(
    ("name", "range_name"), [("cute_pipeline", "load"), ("cute_pipeline", "tile"), ("cute_affine", "load")]
)
def test_a_range_pooled_equals_a_recount(name, range_name):
    capture = Capture.load(FIXTURES / name)
    found = capture.range(range_name)
    values = recount(FIXTURES / name, range_name)
    assert (found.count, found.total, found.min, found.max) == (
        len(values),
        sum(values),
        values[0],
        values[-1],
    )
    assert (found.p50, found.p90, found.p99) == (rank(values, 0.5), rank(values, 0.9), rank(values, 0.99))


def test_a_kernel_narrows_it_and_an_unknown_name_is_said():
    capture = Capture.load(FIXTURES / "cute_pipeline")
    assert capture.range("tile", kernel="rowsum").count == len(recount(FIXTURES / "cute_pipeline", "tile"))
    with pytest.raises(UsageError):
        capture.range("tile", kernel="no_such_kernel")
    with pytest.raises(UsageError, match="no range 'nothing'"):
        capture.range("nothing")


def test_ranges_are_flat_rows_per_kernel_and_range():
    rows = Capture.load(FIXTURES / "cute_pipeline").ranges()
    assert {row["range"] for row in rows} == {"load", "tile", "wait", "reduce"}
    for row in rows:
        stats = {"count", "total", "mean", "min", "p50", "p90", "p99", "max"}
        assert set(row) == {"process", "kernel", "range", "type", *stats}
        assert row["count"] == len(recount(FIXTURES / "cute_pipeline", row["range"]))
