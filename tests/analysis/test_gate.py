"""The repeats' rank test (analysis.gate) and ``iket diff`` / ``iket run --baseline`` judging
repeated captures with it, through the real CLI."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from iket_cli.analysis import gate
from iket_cli.model import manifest

from conftest import replay, run_iket


def brute_force(base: list[float], new: list[float]) -> float:
    """P(U >= U observed) over every split of the pooled values: the definition, slowly."""

    def u(x, y):
        return sum((b > a) + 0.5 * (b == a) for a in x for b in y)

    pooled, m = [*base, *new], len(new)
    observed = u(base, new)
    hits = total = 0
    for chosen in itertools.combinations(range(len(pooled)), m):
        y = [pooled[i] for i in chosen]
        x = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        hits += u(x, y) >= observed - 1e-9
        total += 1
    return hits / total


def test_the_exact_test_counts_every_split_ties_included():
    rng = random.Random(18)
    for _ in range(150):
        base = [rng.choice([192, 224, 256, 288]) for _ in range(rng.randint(1, 6))]
        new = [rng.choice([192, 224, 256, 288]) for _ in range(rng.randint(1, 6))]
        assert gate.p_slower(base, new) == pytest.approx(brute_force(base, new), abs=1e-12), (base, new)
    assert gate.p_slower([1, 2, 3], [4, 5, 6]) == pytest.approx(1 / 20)
    assert gate.p_slower([4, 5, 6], [1, 2, 3]) == 1.0


def test_verdicts():
    assert gate.judge([1000] * 5, [1000] * 5, 0.05) == ("same", None), "no change"
    verdict, p = gate.judge([1000, 1010, 990, 1005, 995], [1200, 1210, 1190, 1205, 1195], 0.05)
    assert verdict == "slower" and p == pytest.approx(1 / 252)
    verdict, p = gate.judge([1000, 1300, 990, 1250, 995], [1200, 1010, 1190, 1005, 1195], 0.05)
    assert verdict == "same" and p > gate.ALPHA, "over the threshold, but the repeats overlap"
    assert gate.judge([1000, 1010], [1200, 1210], 0.05)[0] == "undecided", "2 against 2: p >= 1/6"
    assert gate.judge([224], [288], 0.05)[0] == "undecided"
    assert gate.judge([1000, 1000, 1000], [1020, 1020, 1020], 0.05)[0] == "same", "under the threshold"
    assert gate.judge([100, 100, 100], [120, 120, 120], 0.05)[0] == "same", "under one timer step"
    assert gate.enough(3, 3) and gate.enough(2, 5) and not gate.enough(2, 4)


def repeated(double, work: Path, name: str, durations: list[int]) -> Path:
    """A capture with one repeat per value, each repeat's affine range made that long."""
    (work / "w.py").write_text("def workload():\n    pass\n")
    env = {**replay("affine"), "IKET_CACHE_DIR": str(work / "cache")}
    done = run_iket(
        "profile",
        "--run-iket",
        double,
        "-o",
        name,
        "--repeat",
        len(durations),
        "w.py:workload",
        cwd=work,
        env=env,
    )
    assert done.code == 0, done
    record = manifest.read(work / name)
    for process, took in zip(record["processes"], durations, strict=True):
        path = work / name / process["artifacts"]["trace_json"]["path"]
        data = json.loads(path.read_text())
        (only,) = data["launches"][0]["ranges"]
        only["endTs"] = only["startTs"] + took
        path.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")))
    return work / name


def test_diff_of_repeated_captures_by_the_rank_test(double, tmp_path):
    base = repeated(double, tmp_path, "base", [1000, 1010, 990, 1005, 995])
    same = repeated(double, tmp_path, "same", [1004, 996, 1012, 990, 1001])
    slower = repeated(double, tmp_path, "slower", [1100, 1110, 1090, 1105, 1095])
    few = repeated(double, tmp_path, "few", [1100, 1110])
    ok = run_iket("diff", base, same, "--fail-over", "5%", cwd=tmp_path)
    assert ok.code == 0 and "5 vs 5 repeats" in ok.stdout, ok
    bad = run_iket("diff", base, slower, "--fail-over", "5%", "--format", "json", cwd=tmp_path)
    assert bad.code == 1 and "got slower than --fail-over 5%" in bad.stderr, bad
    (change,) = json.loads(bad.stdout)["changes"]
    assert change["repeats"] == [5, 5] and change["p_value"] == pytest.approx(1 / 252)
    assert change["base"] == 1000 and change["new"] == 1100, "the medians of the per-repeat medians"
    assert run_iket("diff", base, slower, "--fail-over", "15%", cwd=tmp_path).code == 0
    few_base = repeated(double, tmp_path, "few_base", [1000, 1010])
    unsure = run_iket("diff", few_base, few, "--fail-over", "5%", cwd=tmp_path)
    assert unsure.code == 1 and "not enough repeats to decide" in unsure.stderr, unsure
    assert "UNDECIDED" in unsure.stdout and "Traceback" not in unsure.stderr
    single = run_iket(
        "diff", base, tmp_path / "few" / "iket_pid_0x204.trace.json", "--fail-over", "5%", cwd=tmp_path
    )
    assert single.code == 1 and "5 repeat(s) of BASE and 1 of NEW" in single.stderr, single


def test_iket_run_baseline_uses_the_same_rule(double, tmp_path):
    (tmp_path / "w.py").write_text("def workload():\n    pass\n")
    (tmp_path / "iket.toml").write_text(
        f'run_iket = "{double}"\nrepeat = 2\n[[jobs]]\nname = "w"\ntarget = "w.py:workload"\n'
    )
    env = {**replay("affine"), "IKET_CACHE_DIR": str(tmp_path / "cache")}
    assert run_iket("run", "--output", "base", cwd=tmp_path, env=env).code == 0
    for trace in (tmp_path / "base" / "w").rglob("*.trace.json"):  # the baseline made much faster
        data = json.loads(trace.read_text())
        (only,) = data["launches"][0]["ranges"]
        only["endTs"] = only["startTs"] + 32
        trace.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")))
    gated = run_iket(
        "run", "--output", "new", "--baseline", "base", "--fail-over", "5%", cwd=tmp_path, env=env
    )
    assert gated.code == 1 and "not enough repeats to decide" in gated.stderr, gated
