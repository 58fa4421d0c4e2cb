"""``iket profile --tracker auto|fresh|DIR`` through the real CLI: the real run-iket generates
the configuration from a cached tracker pass (its cubins relocated into the cache) and runs
the capture pass alone; the double replays the H200's raw capture in that pass."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from iket_cli.model import manifest

from conftest import FIXTURES, replay, run_iket


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A workload that appends a line per pass, and a private tracker cache."""
    (tmp_path / "w.py").write_text(
        "import os\n"
        "def workload():\n"
        "    with open(os.environ['PASSES'], 'a') as f:\n"
        "        f.write('pass\\n')\n"
        "    print('workload ran')\n"
    )
    return tmp_path


def capture(double, work: Path, out: str, fixture: str = "affine", *args: str):
    env = {**replay(fixture), "PASSES": str(work / "passes.txt"), "IKET_CACHE_DIR": str(work / "cache")}
    done = run_iket("profile", "--run-iket", double, "-o", out, *args, "w.py:workload", cwd=work, env=env)
    passes = (work / "passes.txt").read_text().count("pass") if (work / "passes.txt").exists() else 0
    (work / "passes.txt").unlink(missing_ok=True)
    return done, passes


def entries(work: Path) -> list[Path]:
    root = work / "cache" / "trackers"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def test_the_second_capture_reuses_the_tracker_pass(work, double):
    first, passes = capture(double, work, "cap1")
    assert first.code == 0 and passes == 2, first
    (entry,) = entries(work)
    assert manifest.read(work / "cap1")["tracker"] == {
        "mode": "fresh",
        "source": None,
        "key": entry.name,
        "rerun": None,
    }
    cached = json.loads(next(entry.glob("pid_*/tracker.json")).read_text())
    assert all(Path(m["image"]).parent.parent == entry for m in cached["modules"]), (
        "cubins point into the cache"
    )
    second, passes = capture(double, work, "cap2")
    assert second.code == 0 and passes == 1, second
    assert "reusing the tracker pass of an earlier capture of this command" in second.stderr
    assert "runs twice" not in second.stderr
    record = manifest.read(work / "cap2")
    assert record["tracker"]["mode"] == "reused" and record["tracker"]["source"] == str(entry)
    assert record["phases"]["tracker"] is None and record["status"] == "ok"
    assert "--use-tracker-dir" in record["run_iket_argv"]
    same = (work / "cap1" / "iket_pid_0x204.trace.json").read_bytes()
    assert (work / "cap2" / "iket_pid_0x204.trace.json").read_bytes() == same
    left = sorted(p.name for p in work.iterdir() if p.name != "__pycache__")  # Python's, where it writes one
    assert left == ["cache", "cap1", "cap2", "w.py"], "nothing left behind"


def test_a_tracker_pass_that_does_not_fit_is_thrown_away_and_the_capture_made_again(work, double):
    assert capture(double, work, "cap1", "affine")[0].code == 0
    # the same command now launches other kernels (the double replays another H200 capture)
    done, passes = capture(double, work, "cap2", "multi")
    assert done.code == 0, done
    assert passes == 3, "the reused capture pass, then both passes again"
    assert "the cached tracker pass does not fit this capture" in done.stderr
    assert "vectorized_elementwise_kernel<" in done.stderr and "_ZN" not in done.stderr
    record = manifest.read(work / "cap2")
    assert record["tracker"]["mode"] == "fresh" and "launch(es) now" in record["tracker"]["rerun"]
    assert record["status"] == "ok" and [k["name"] for k in record["processes"][0]["kernels"]] == [
        "scale_loop_kernel",
        "copy_kernel_kernel",
    ]
    assert "captured again with a tracker pass" in (work / "cap2" / "iket.log").read_text()
    assert not (work / "cap2.failed").exists(), "a thrown-away attempt is not a failure"
    again, passes = capture(double, work, "cap3", "multi")
    assert again.code == 0 and passes == 1, "the cache now holds the new tracker pass"


def test_fresh_always_runs_both_passes_and_refreshes_the_cache(work, double):
    for out in ("cap1", "cap2"):
        done, passes = capture(double, work, out, "affine", "--tracker", "fresh")
        assert done.code == 0 and passes == 2, done
        assert manifest.read(work / out)["tracker"]["mode"] == "fresh"
    assert len(entries(work)) == 1


def test_a_given_tracker_folder_is_used(work, double):
    done, passes = capture(double, work, "cap", "affine", "--tracker", str(FIXTURES / "affine" / "tracker"))
    assert done.code == 0 and passes == 1, done
    record = manifest.read(work / "cap")
    assert record["tracker"]["mode"] == "given" and record["status"] == "ok"
    assert entries(work) == [], "a given folder is not cached"


def test_a_given_tracker_folder_that_does_not_fit_makes_the_capture_suspect(work, double):
    done, _ = capture(double, work, "cap", "multi", "--tracker", str(FIXTURES / "affine" / "tracker"))
    assert done.code == 0, done
    record = manifest.read(work / "cap")
    assert record["status"] == "suspect" and "the given tracker output does not fit" in record["drift"][0]


def test_a_folder_without_tracker_output_is_refused(work, double):
    done, passes = capture(double, work, "cap", "affine", "--tracker", str(work))
    assert done.code == 2 and passes == 0
    assert "holds no tracker output" in done.stderr and "Traceback" not in done.stderr
    assert not (work / "cap").exists()


def test_another_argument_is_another_entry(work, double):
    env = {**replay("affine"), "PASSES": str(work / "p"), "IKET_CACHE_DIR": str(work / "cache")}
    (work / "s.py").write_text("import sys, os\nopen(os.environ['PASSES'], 'a').write('pass\\n')\n")
    for arg in ("a", "b", "a"):
        done = run_iket(
            "profile", "--run-iket", double, "-o", f"cap-{arg}", "--clobber", "s.py", arg, cwd=work, env=env
        )
        assert done.code == 0, done
    assert len(entries(work)) == 2
    assert (work / "p").read_text().count("pass") == 2 + 2 + 1, "the second 'a' reused the first's"


def test_warp_trace_has_no_tracker_pass_to_reuse(work, double):
    env = {
        **replay("multi"),
        "IKET_DOUBLE_WARP_CAPTURE": str(FIXTURES / "warp_multi"),
        "IKET_CACHE_DIR": str(work / "c"),
    }
    (work / "v.py").write_text("def workload():\n    pass\n")
    done = run_iket(
        "profile", "--run-iket", double, "--warp-trace", "-o", "cap", "v.py:workload", cwd=work, env=env
    )
    assert done.code == 0, done
    assert manifest.read(work / "cap")["tracker"]["mode"] == "none"
    assert not (work / "c").exists()


def test_an_unwritable_cache_costs_only_the_next_tracker_pass(work, double):
    (work / "cache").write_text("not a folder")
    done, passes = capture(double, work, "cap", "affine")
    assert done.code == 0 and passes == 2, done
    assert "tracker pass not cached" in (work / "cap" / "iket.log").read_text()
    shutil.rmtree(work / "cap")


def test_a_command_whose_tracker_pass_never_fits_stops_being_reused(work, double):
    assert capture(double, work, "c1", "affine")[0].code == 0
    first, passes = capture(double, work, "c2", "multi")  # reused, does not fit: miss 1
    assert first.code == 0 and passes == 3 and "replaces it in the cache" in first.stderr
    second, passes = capture(double, work, "c3", "affine")  # reused, does not fit: miss 2
    assert second.code == 0 and passes == 3 and "will not be reused for this command again" in second.stderr
    third, passes = capture(double, work, "c4", "affine")
    assert third.code == 0 and passes == 2, "no third try: both passes at once"
    assert manifest.read(work / "c4")["tracker"]["mode"] == "fresh"


def test_a_tracker_pass_that_fits_again_clears_the_misses(work, double):
    assert capture(double, work, "c1", "affine")[0].code == 0
    assert capture(double, work, "c2", "multi")[1] == 3  # miss 1; multi's tracker pass cached
    fits, passes = capture(double, work, "c3", "multi")
    assert fits.code == 0 and passes == 1
    assert not list((work / "cache" / "trackers").glob("*.misses")), "a fit starts the count again"


def test_the_rerun_stays_within_the_timeout(work, double):
    """--timeout bounds the whole capture: the thrown-away attempt and the rerun together."""
    assert capture(double, work, "c1", "affine")[0].code == 0
    env = {
        **replay("multi"),  # the reused tracker pass will not fit: a rerun follows
        "PASSES": str(work / "passes.txt"),
        "IKET_CACHE_DIR": str(work / "cache"),
        "IKET_DOUBLE_SLEEP": "2",  # each pass: the reused one, then two more in the rerun
    }
    args = ("profile", "--run-iket", double, "-o", "c2", "--timeout", "5", "w.py:workload")
    done = run_iket(*args, cwd=work, env=env)
    assert done.code == 124, done
    assert "timed out after 5 s" in done.stderr and "does not fit" in done.stderr
