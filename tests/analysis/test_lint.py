"""Each lint on a hand-made trace that shows it, and on the real captures that do not."""

from __future__ import annotations

import json

import pytest

from iket_cli.analysis import lint
from iket_cli.model import trace

from conftest import FIXTURES, run_iket, write_trace

REAL = {
    "affine": FIXTURES / "affine" / "iket_pid_0x204.trace.json",
    "multi": FIXTURES / "multi" / "iket_pid_0x23f.trace.json",
    "spawn": FIXTURES / "spawn" / "iket_pid_0x299.trace.json",
}


def codes(path) -> list[str]:
    return [f.code for f in lint.lint(trace.load(path))]


def test_empty_launch(tmp_path):
    path = tmp_path / "t.trace.json"
    write_trace(
        path,
        ["body"],
        [
            {"kernel": "k", "ranges": [(0, 0, 0, 1000)], "warps": [(0, 0, 2000)]},
            {"kernel": "k", "warps": [(0, 0, 2000)]},
        ],
    )
    (finding,) = lint.lint(trace.load(path))
    assert finding.code == "empty-launch" and "launch 1 of k" in finding.message
    assert "CUTE_DSL_NO_CACHE" in finding.hint


def test_many_and_long_names(tmp_path):
    names = [f"n{i}" for i in range(31)] + ["a_name_that_is_thirty_bytes_xx"]
    ranges = [(i, 0, 1000 * i, 1000 * i + 500) for i in range(len(names))]
    path = tmp_path / "t.trace.json"
    write_trace(path, names, [{"kernel": "k", "ranges": ranges, "warps": [(0, 0, 10**6)]}])
    found = {f.code: f for f in lint.lint(trace.load(path))}
    assert "32 distinct event names" in found["many-names"].message
    assert "'a_name_that_is_thirty_bytes_xx' is 30 bytes" in found["long-name"].message
    assert "resolution" not in found


def test_resolution(tmp_path):
    path = tmp_path / "t.trace.json"
    spans = [(0, 0, 100 * i, 100 * i + 32) for i in range(6)] + [(0, 0, 1000, 2000)]
    write_trace(path, ["tiny"], [{"kernel": "k", "ranges": spans, "warps": [(0, 0, 3000)]}])
    assert codes(path) == ["resolution"]


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_captures(name):
    expected = ["resolution"] if name == "multi" else []  # multi's `step` ranges: p50 32 ns
    assert codes(REAL[name]) == expected


def test_cli(tmp_path):
    clean = run_iket("lint", FIXTURES / "affine", "--strict", cwd=tmp_path)
    assert clean.code == 0 and "no instrumentation problem" in clean.stdout
    strict = run_iket("lint", FIXTURES / "multi", "--strict", "--format", "json", cwd=tmp_path)
    assert strict.code == 1, strict
    assert json.loads(strict.stdout)["processes"][0]["findings"][0]["code"] == "resolution"
    shown = run_iket("show", FIXTURES / "multi", "--format", "json", cwd=tmp_path)
    assert "[resolution]" in shown.stderr and json.loads(shown.stdout)["processes"][0]["findings"]
