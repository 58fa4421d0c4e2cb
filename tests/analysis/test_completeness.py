"""What a capture lost, from each source (analysis/completeness.py)."""

import shutil
from collections import Counter
from pathlib import Path

from iket_cli.analysis import completeness as judge
from iket_cli.model.completeness import BUDGET, CUDA_GRAPH, LAUNCHES, RECORDS, UNKNOWN
from iket_cli.model.injection_log import LogReading, Said
from iket_cli.model.rawwarps import LaunchWarps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _launch(kernel="stage_kernel", index=1, recorded=0, warps=24, budget=3) -> LaunchWarps:
    return LaunchWarps(kernel, index, warps, recorded, budget, 0, (6, 1, 1), (128, 1, 1))


def test_every_fixture_of_a_whole_capture_is_complete():
    for name in ("affine", "multi", "cute_affine", "cute_pipeline", "spawn"):
        found = judge.check(judge.gather(FIXTURES / name))
        assert found.complete is True and not found.losses, (name, found)
        assert {"decode", "budget", "launches"} <= set(found.checked), name


def test_a_budget_below_the_tracker_count_is_the_cause_with_the_budget_needed():
    launches = [_launch(index=i) for i in (1, 2, 3)] + [_launch("finish", 4, 24)]
    (loss,) = judge.check(judge.Evidence(warps={"0x2a": launches}, needed=16)).losses
    assert (loss.kernel, loss.cause, loss.lost) == ("stage_kernel", BUDGET, RECORDS)
    assert (loss.launches, loss.records) == (3, 72)
    assert (loss.budget, loss.needed, loss.pid_hex, loss.source) == (3, 16, "0x2a", "budget")
    assert loss.message == (
        "3 launches of stage_kernel recorded nothing: the budget of 3 timestamps per warp is below "
        "the 16 the tracker pass counted"
    )
    assert loss.fix.endswith("--max-ts-cnt-per-warp 16")


def test_some_warps_dropped_are_counted_as_records():
    evidence = judge.Evidence(warps={"0x2a": [_launch(recorded=20, budget=8)]}, needed=16)
    (loss,) = judge.check(evidence).losses
    assert loss.message.startswith("4 warp records of stage_kernel dropped in 1 launch")


def test_an_empty_launch_without_a_known_cause_lists_the_candidates():
    (loss,) = judge.check(judge.Evidence(warps={"0x2a": [_launch(budget=256)]}, needed=16)).losses
    assert loss.cause == UNKNOWN and "the cause is not known" in loss.message
    assert all(candidate in loss.fix for candidate in judge.EMPTY_CANDIDATES)


def test_the_injection_logs_word_names_the_cause_and_is_not_said_twice():
    said = Said(BUDGET, RECORDS, "Trace incomplete: ...", kernel="stage_kernel", records=24, budget=3)
    log = LogReading([said, said, said], Counter())
    evidence = judge.Evidence(warps={"0x2a": [_launch()]}, needed=None, log=log, log_level="info")
    (loss,) = judge.check(evidence).losses
    assert (loss.cause, loss.source, loss.needed) == (BUDGET, "injection-log", None)
    found = judge.check(judge.Evidence(warps={"0x2a": []}, log=log, log_level="info"))
    (told,) = found.losses  # no decode evidence: the log alone
    assert (told.launches, told.records, told.source) == (3, 72, "injection-log")


def test_graph_launches_the_capture_lacks_are_named_by_the_tracker_pass():
    evidence = judge.Evidence(
        warps={"0x2a": []},
        needed=8,
        tracked=Counter({"profiled_affine_kernel": 2}),
        tracked_graph=Counter({"profiled_affine_kernel": 3}),
        failed=Counter({(1, "invalid argument"): 1}),
    )
    (loss,) = judge.check(evidence).losses
    assert (loss.cause, loss.lost, loss.launches) == (CUDA_GRAPH, LAUNCHES, 3)
    assert loss.message == (
        "3 graph launches of profiled_affine_kernel not traced (3 in the tracker pass, 0 captured; "
        "IKET printed 1 failed operation)"
    )


def test_failed_operations_with_every_graph_launch_traced_are_no_loss():
    """H100, 4.8.1: one failed operation per pass, and all 3 replays in graphLaunches."""
    graphs = Counter({"profiled_affine_kernel": 3})
    evidence = judge.Evidence(
        warps={"0x2a": []}, tracked_graph=graphs, captured_graph=graphs, failed=Counter({(1, "x"): 1})
    )
    assert judge.check(evidence).losses == []


def test_a_difference_between_the_passes_without_failed_operations_is_drift_not_a_loss():
    captured = [_launch("k", i, recorded=24, budget=8) for i in (1, 2, 3)]  # 3 whole launches of 4
    evidence = judge.Evidence(warps={"0x2a": captured}, tracked=Counter({"k": 4}), needed=8)
    assert judge.check(evidence).losses == []


def test_the_sources_not_checked_say_why(tmp_path):
    found = judge.check(judge.Evidence())
    assert found.complete is None
    assert {u["source"] for u in found.unchecked} == {"decode", "budget", "injection-log", "launches"}
    folder = tmp_path / "multi"
    shutil.copytree(FIXTURES / "multi", folder)
    shutil.rmtree(folder / "tracker")
    found = judge.check(judge.gather(folder))
    assert found.complete is True and "budget" in {u["source"] for u in found.unchecked}


def test_a_bare_trace_says_what_it_lost_by_itself():
    """No raw capture, no manifest (an in-process session's trace, H100): no warp lifetime left."""
    from iket_cli.model import trace

    (loss,) = judge.from_trace(trace.load(FIXTURES / "session" / "budget1.trace.json"))
    assert (loss["cause"], loss["launches"], loss["records"], loss["source"]) == (BUDGET, 1, 1, "trace")
    assert "not even their warps' lifetimes" in loss["message"]
    for name in ("affine", "multi", "cute_pipeline", "warp_multi", "loss_graph"):
        for path in (FIXTURES / name).glob("*.trace.json"):
            assert judge.from_trace(trace.load(path)) == [], path


def test_a_single_cluster_trace_is_not_judged_by_its_warps():
    from iket_cli.model import trace

    loaded = trace.load(FIXTURES / "session" / "budget1.trace.json")
    loaded.launches[0].single_cluster = True
    assert judge.from_trace(loaded) == []
