"""Launch statistics of warp-traced kernels, against an independent recount of the same
trace with plain ``json.load`` (no numpy scan, no iket model)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from iket_cli.analysis import launches
from iket_cli.model import trace as trace_mod

from conftest import FIXTURES


def recount(path: Path) -> dict[str, dict]:
    """Per kernel: each launch's span, its warps' lifetimes and SMs, and the gap before it."""
    doc = json.loads(path.read_text())
    sm = [loc["smId"] for loc in doc["locationTable"]]
    per: dict[str, dict] = defaultdict(lambda: {"spans": [], "warps": [], "sms": [], "gaps": []})
    timed = []
    for launch in doc["launches"]:
        warps = launch["warpLifetimes"]
        start, end = min(w["startTs"] for w in warps), max(w["endTs"] for w in warps)
        entry = per[launch["kernelName"]]
        entry["spans"].append(end - start)
        entry["warps"] += [w["endTs"] - w["startTs"] for w in warps]
        entry["sms"].append(len({sm[w["locIdx"]] for w in warps}))
        timed.append((start, end, launch["kernelName"]))
    ended = None
    for start, end, kernel in sorted(timed):
        if ended is not None:
            per[kernel]["gaps"].append(max(0, start - ended))
        ended = end if ended is None else max(ended, end)
    return per


def rank(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def check(path: Path) -> list[launches.KernelLaunches]:
    rows = launches.per_kernel(trace_mod.load(path))
    expected = recount(path)
    assert [r.kernel for r in rows] == list(expected), "one row per kernel, in first-launch order"
    for row in rows:
        want = expected[row.kernel]
        assert row.launches == len(want["spans"])
        assert (row.span.count, row.span.total, row.span.max) == (
            len(want["spans"]),
            sum(want["spans"]),
            max(want["spans"]),
        )
        assert (row.span.p50, row.span.p90) == (rank(want["spans"], 0.5), rank(want["spans"], 0.9))
        assert (row.warp_lifetimes.count, row.warp_lifetimes.total) == (
            len(want["warps"]),
            sum(want["warps"]),
        )
        assert row.warp_lifetimes.p50 == rank(want["warps"], 0.5)
        assert row.sms == max(want["sms"])
        if want["gaps"]:
            assert (row.gap_before.count, row.gap_before.p50) == (len(want["gaps"]), rank(want["gaps"], 0.5))
        else:
            assert row.gap_before is None
    return rows


def test_warp_multi_launch_spans_match_a_recount():
    rows = check(FIXTURES / "warp_multi" / "iket_pid_0x7c4.trace.json")
    assert sum(r.launches for r in rows) == 27
    assert not any(r.name.startswith("_Z") for r in rows)


def test_torch_step_launch_spans_match_a_recount(torch_warp):
    rows = check(torch_warp / "iket_pid_0x21f.trace.json")
    by_name = {r.name: r for r in rows}
    gemm = by_name["cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>"]
    assert gemm.launches == 4 and gemm.grid == (128, 1, 1) and gemm.sms == 128
    assert 300_000 < gemm.span.p50 < 400_000, "a 2048x2048x2048 fp32 GEMM: about 0.34 ms on the H200"
    assert by_name["at::native::reduce_kernel<…>"].launches == 5
    assert sum(r.launches for r in rows) == 27 and len(rows) == 7


def test_an_instrumented_kernel_is_not_quiet():
    loaded = trace_mod.load(FIXTURES / "multi" / "iket_pid_0x23f.trace.json")
    assert launches.quiet_kernels(loaded) == set()
    assert launches.spans(loaded) == []


@pytest.mark.parametrize("fixture", ["warp_multi"])
def test_spans_are_the_recount(fixture):
    path = next((FIXTURES / fixture).glob("*.trace.json"))
    expected = [s for entry in recount(path).values() for s in entry["spans"]]
    assert sorted(s for _, s in launches.spans(trace_mod.load(path))) == sorted(expected)
