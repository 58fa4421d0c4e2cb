"""``iket diff`` on the real traces and on traces made to differ."""

from __future__ import annotations

import json
import random

import pytest

from iket_cli.analysis import diff
from iket_cli.errors import UsageError
from iket_cli.model.reading import open_capture

from conftest import FIXTURES, run_iket, write_trace


def synthetic(path, durations: dict[str, list[int]], kernel: str = "k") -> None:
    """One launch, one warp, the instances of each range one after another."""
    ranges, t = [], 1_000_000
    for idx, values in enumerate(durations.values()):
        for d in values:
            ranges.append((idx, 0, t, t + d))
            t += d + 100
    write_trace(path, list(durations), [{"kernel": kernel, "ranges": ranges, "warps": [(0, 0, t)]}])


def test_a_capture_against_itself_is_unchanged(tmp_path):
    result = run_iket(
        "diff", FIXTURES / "multi", FIXTURES / "multi", "--fail-over", "1%", "--format", "json", cwd=tmp_path
    )
    assert result.code == 0, result
    changes = json.loads(result.stdout)["changes"]
    assert {(c["kernel"], c["range"]) for c in changes} == {
        ("scale_loop_kernel", "step"),
        ("copy_kernel_kernel", "copy"),
    }
    assert all(c["delta"] == 0 and c["ratio"] == 1 and not c["regression"] for c in changes)


def test_a_real_slowdown_fails_the_gate(tmp_path):
    rng = random.Random(1)
    base = [rng.randint(900, 1100) for _ in range(400)]
    synthetic(tmp_path / "base.trace.json", {"mainloop": base, "epilogue": base})
    synthetic(tmp_path / "new.trace.json", {"mainloop": [v + 200 for v in base], "epilogue": base})
    result = run_iket(
        "diff", tmp_path / "base.trace.json", tmp_path / "new.trace.json", "--fail-over", "5%", cwd=tmp_path
    )
    assert result.code == 1, result
    assert "REGRESSION" in result.stdout and "k / mainloop" in result.stderr
    per_range = run_iket(
        "diff",
        tmp_path / "base.trace.json",
        tmp_path / "new.trace.json",
        "--fail-over",
        "mainloop=30%,*=5%",
        cwd=tmp_path,
    )
    assert per_range.code == 0, per_range


def test_noise_and_timer_steps_are_not_regressions(tmp_path):
    rng = random.Random(2)
    wide = [rng.randint(100, 5000) for _ in range(30)]
    synthetic(tmp_path / "a.trace.json", {"noisy": wide, "tiny": [64] * 50})
    shifted = [v + 150 for v in wide]  # median +150 ns: within the spread of 30 wide instances
    synthetic(tmp_path / "b.trace.json", {"noisy": shifted, "tiny": [96] * 50})  # +1 timer step
    changes = {
        c.range: c
        for c in diff.compare(
            open_capture(tmp_path / "a.trace.json"), open_capture(tmp_path / "b.trace.json"), fail_over="5%"
        )
    }
    assert changes["noisy"].delta > 0.05 * changes["noisy"].base and not changes["noisy"].regression
    assert changes["noisy"].noise_ns > changes["noisy"].delta
    assert changes["tiny"].ratio == 1.5 and not changes["tiny"].regression, "one timer step"


def test_added_and_removed(tmp_path):
    changes = diff.compare(open_capture(FIXTURES / "affine"), open_capture(FIXTURES / "multi"))
    status = {(c.kernel, c.range): c.status for c in changes}
    assert status[("profiled_affine_kernel", "affine")] == "removed"
    assert status[("scale_loop_kernel", "step")] == "added"


@pytest.mark.parametrize("spec", ["fast", "x=", "-5%"])
def test_bad_thresholds(spec):
    with pytest.raises(UsageError):
        diff.parse_thresholds(spec)


def test_thresholds_most_specific_first():
    rules = diff.parse_thresholds("*=10%,mainloop=3%,gemm/epi*=0.2")
    assert diff.threshold_for(rules, "gemm", "mainloop") == 0.03
    assert diff.threshold_for(rules, "gemm", "epilogue") == 0.2
    assert diff.threshold_for(rules, "gemm", "other") == 0.10


@pytest.mark.parametrize("given", ["5", "50", "1", "mainloop=5"])
def test_a_bare_number_of_one_or_more_is_refused_not_read_as_hundreds_of_percent(tmp_path, given):
    """``--fail-over 5`` meant as 5% used to read as 500%: a gate that never fires."""
    result = run_iket("diff", FIXTURES / "multi", FIXTURES / "multi", "--fail-over", given, cwd=tmp_path)
    assert result.code == 2, result
    number = given.split("=")[-1]
    assert "a bare number is a fraction" in result.stderr and f"did you mean {number}%?" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bare_fraction_is_a_threshold_and_help_says_what_a_bare_number_means(tmp_path):
    assert diff.parse_thresholds("0.05") == [("*", 0.05)]
    for bad in ("nan", "inf", "-1%"):
        with pytest.raises(UsageError):
            diff.parse_thresholds(bad)
    shown = run_iket("diff", "--help", cwd=tmp_path)
    assert "a bare number is a fraction: 0.05 is 5%" in " ".join(shown.stdout.split())


def test_without_a_gate_a_matched_range_says_which_way_it_moved(tmp_path):
    synthetic(tmp_path / "base.trace.json", {"r": [1000] * 20})
    synthetic(tmp_path / "slow.trace.json", {"r": [1700] * 20})
    slower = run_iket("diff", tmp_path / "base.trace.json", tmp_path / "slow.trace.json", cwd=tmp_path)
    assert slower.code == 0, slower
    assert "1.700x" in slower.stdout and "slower" in slower.stdout and "matched" not in slower.stdout
    faster = run_iket("diff", tmp_path / "slow.trace.json", tmp_path / "base.trace.json", cwd=tmp_path)
    assert "faster" in faster.stdout
    same = run_iket("diff", tmp_path / "base.trace.json", tmp_path / "base.trace.json", cwd=tmp_path)
    assert " same " in same.stdout


def test_the_gate_judges_a_bare_lossy_trace_from_itself(tmp_path):
    """A trace with no manifest beside it (or a capture made before iket kept a completeness
    record) is judged from its own warps: one that lost every record cannot pass a gate."""
    lossy = tmp_path / "lossy.trace.json"
    lossy.write_bytes(next((FIXTURES / "loss_budget").glob("iket_pid_*.trace.json")).read_bytes())
    gated = run_iket("diff", FIXTURES / "affine", lossy, "--fail-over", "5%", cwd=tmp_path)
    assert gated.code == 1, gated
    assert "NEW" in gated.stderr and "INCOMPLETE" in gated.stderr and "the gate cannot pass" in gated.stderr
    clean = run_iket("diff", FIXTURES / "affine", FIXTURES / "affine", "--fail-over", "5%", cwd=tmp_path)
    assert clean.code == 0, clean
    assert "no completeness record: judged from its traces alone" in clean.stderr
