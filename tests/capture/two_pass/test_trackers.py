"""The tracker cache's parts: what its key depends on, the fit check, pruning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iket_cli.capture.plan import Options, coerce_target, resolve, tracker_key
from iket_cli.capture.two_pass import trackers

from conftest import FIXTURES


@pytest.fixture
def plan_for(tmp_path, real_run_iket, monkeypatch):
    (tmp_path / "w.py").write_text("def workload():\n    pass\n")
    monkeypatch.chdir(tmp_path)

    def make(env: dict | None = None, **options):
        opts = Options(env=dict(env or {}), run_iket=str(real_run_iket), cwd=tmp_path, **options)
        return resolve(coerce_target("w.py:workload"), tmp_path / "out", opts)

    return make


def test_the_key_follows_what_shapes_the_tracker_pass(plan_for, tmp_path, monkeypatch):
    def key(*args, **kwargs) -> str:
        return trackers.key(tracker_key(plan_for(*args, **kwargs)))

    base = key()
    assert key() == base, "stable"
    assert key({"CUDA_VISIBLE_DEVICES": "1"}) != base
    assert key({"CUTE_DSL_ARCH": "sm_90a"}) != base
    assert key(max_ts_cnt_per_warp=8) != base
    assert key({"SOME_UNRELATED": "x"}) != base, "a variable given with --env (or a job's env) counts"
    monkeypatch.setenv("SOME_AMBIENT", "x")
    assert key() == base, "of the ambient environment, only the relevant variables"
    assert plan_for().tracker.key == base, "the plan's tracker carries the same key"
    (tmp_path / "w.py").write_text("def workload():\n    return 1\n")
    assert key() != base, "an edited script is compiled anew"


def test_choose_falls_back_to_fresh_and_none(plan_for, tmp_path):
    cache = {"IKET_CACHE_DIR": str(tmp_path / "c")}
    assert plan_for(cache).tracker.mode == "fresh"
    assert plan_for(cache, warp_trace=True).tracker.mode == "none"
    given = plan_for(cache, tracker=str(FIXTURES / "multi" / "tracker")).tracker
    assert given.mode == "given" and given.source == FIXTURES / "multi" / "tracker"


def test_a_capture_fits_its_own_tracker_pass_and_not_another():
    assert trackers.stale(FIXTURES / "multi" / "tracker", FIXTURES / "multi" / "iket") is None
    assert trackers.stale(FIXTURES / "affine" / "tracker", FIXTURES / "affine" / "iket") is None
    reason = trackers.stale(FIXTURES / "affine" / "tracker", FIXTURES / "multi" / "iket")
    assert reason is not None and "launch(es) now" in reason and "_Z" not in reason


def test_the_cache_keeps_the_most_recently_used(tmp_path, monkeypatch):
    monkeypatch.setattr(trackers, "KEEP_ENTRIES", 3)
    env = {"IKET_CACHE_DIR": str(tmp_path)}
    for number in range(5):
        tracker = trackers.Tracker("fresh", key=f"{number:024x}")
        entry = trackers.store(tracker, FIXTURES / "affine" / "tracker", env, Path("cap"))
        os.utime(entry, (number, number))  # stored in order, oldest first
    left = sorted(p.name for p in (tmp_path / "trackers").iterdir())
    assert left == [f"{n:024x}" for n in (2, 3, 4)]


def test_nothing_to_store_is_not_an_entry(tmp_path):
    env = {"IKET_CACHE_DIR": str(tmp_path)}
    assert trackers.store(trackers.Tracker("fresh", key="0" * 24), tmp_path / "none", env, Path("c")) is None
    assert trackers.store(trackers.Tracker("none"), FIXTURES / "affine" / "tracker", env, Path("c")) is None
