"""Ways a capture could be lost (issue 31: D2, D3, D15, D16), each through the real CLI.

* D2: a ``DIR.failed`` that is a good capture (named so by hand, or an ``iket run`` job of
  that name) is never replaced by the next failure into DIR.
* D3: ``--clobber`` recognises iket's manifest by its whole shape, not by a key that any
  ``manifest.json`` may hold.
* D15: a stop signal after the publishing exchange never reports "interrupted" about a DIR
  that holds the new capture.
* D16: no message names a folder that no longer exists.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

from iket_cli.model import manifest

from conftest import FIXTURES, run_iket, snapshot


def test_a_good_capture_named_dir_failed_is_never_replaced(harness):
    """D2: ``-o run.failed`` of a capture that succeeded, then a failure into ``run``."""
    (harness.work / "fail.py").write_text("import sys; sys.exit(3)\n")
    good = harness.profile("-o", "run.failed", "w.py:workload")
    harness.check(good, 0)
    before = snapshot(harness.work / "run.failed")
    failed = harness.profile("-o", "run", "fail.py")
    harness.check(failed, 1, "status 3 in the tracker pass")
    assert snapshot(harness.work / "run.failed") == before, "the good capture was replaced"
    assert manifest.read(harness.work / "run.failed")["status"] == "ok"
    hint = next(line for line in failed.stderr.splitlines() if line.startswith("iket: hint:"))
    assert "no evidence kept" in hint and "run.failed is not a failed capture's evidence" in hint
    assert not (harness.work / "run").exists()


def test_failure_evidence_is_still_replaced_by_the_next_failure(harness):
    """D2's other half: evidence of a failure is what the next failure replaces."""
    (harness.work / "fail.py").write_text("import sys; sys.exit(3)\n")
    harness.check(harness.profile("-o", "run", "fail.py"), 1)
    first = manifest.read(harness.work / "run.failed")["started_at"]
    again = harness.profile("-o", "run", "fail.py")
    harness.check(again, 1)
    assert manifest.read(harness.work / "run.failed")["started_at"] != first
    assert f"evidence kept in {harness.work / 'run.failed'}" in again.stderr


def test_an_iket_run_job_named_like_another_jobs_evidence(tmp_path, double):
    """D2 in ``iket run``: job ``a.failed`` succeeds, job ``a`` fails: ``a.failed`` stays."""
    (tmp_path / "w.py").write_text("def workload():\n    pass\n")
    (tmp_path / "fail.py").write_text("import sys; sys.exit(3)\n")
    affine = FIXTURES / "affine"
    (tmp_path / "iket.toml").write_text(
        f'output = "runs"\nrun_iket = "{double}"\n\n'
        f'[[jobs]]\nname = "a.failed"\ntarget = "w.py:workload"\n'
        f'env = {{ IKET_DOUBLE_CAPTURE = "{affine}" }}\n\n'
        f'[[jobs]]\nname = "a"\ntarget = "fail.py"\n'
    )
    result = run_iket("run", cwd=tmp_path)
    assert result.code == 1, result
    assert manifest.read(tmp_path / "runs" / "a.failed")["status"] == "ok", result
    jobs = {j["name"]: j for j in json.loads((tmp_path / "runs" / "run-manifest.json").read_text())["jobs"]}
    assert jobs["a.failed"]["status"] == "ok" and jobs["a"]["status"] != "ok"


def test_clobber_never_removes_a_folder_whose_manifest_is_not_iket_s(harness):
    """D3: ``app/manifest.json`` = ``{"schema_version": "v1"}`` beside ``app/src/``."""
    app = harness.work / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    (app / "manifest.json").write_text(json.dumps({"schema_version": "v1", "status": "ok"}))
    before = snapshot(app)
    result = harness.profile("-o", "app", "--clobber", "w.py:workload")
    harness.check(result, 2, "is not empty and is not an iket capture")
    assert snapshot(app) == before


def test_clobber_still_replaces_an_iket_capture(harness):
    result = harness.profile("-o", "cap", "--clobber", "w.py:workload")
    harness.check(result, 0, previous=False)
    assert manifest.read(harness.work / "cap")["status"] == "ok"


def _published(cap: Path, before: dict) -> bool:
    return snapshot(cap) != before


def test_a_signal_at_publishing_never_reports_a_published_capture_as_interrupted(harness):
    """D15: SIGINT or SIGTERM sent at moments spread around the publishing exchange. Whatever
    the moment, the outcome is one of two: exit 0 with the new capture in DIR, or an
    interruption with DIR as it was. Before the fix, a signal just after the exchange
    reported "interrupted ... staging removed" while DIR held the new capture."""
    for attempt in range(24):
        signum = (signal.SIGINT, signal.SIGTERM)[attempt % 2]
        before = snapshot(harness.work / "cap")
        started = harness.start(
            "profile", "--run-iket", harness.double, "--clobber", "-o", "cap", "w.py:workload"
        )
        started.wait_for("publishing")
        time.sleep((attempt // 2) * 0.004)  # 0 to 44 ms after the line: before, at and after the exchange
        harness.terminal_signal(started, signum)
        result = started.finish()
        assert "Traceback" not in result.stderr, result
        changed = _published(harness.work / "cap", before)
        if result.code == 0:
            assert changed, f"exit 0 but DIR holds the old capture\n{result}"
            assert manifest.read(harness.work / "cap")["status"] == "ok"
        else:
            assert result.code == 128 + signum, result
            assert not changed, f"reported as interrupted, but DIR holds the new capture\n{result}"
        harness.assert_nothing_left()


def assert_paths_exist(result) -> None:
    for path in re.findall(r"(/[^\s;,()']+)", result.stderr):
        assert Path(path.rstrip(".")).exists(), f"{path} is named but does not exist:\n{result}"


def test_no_message_names_a_folder_that_is_gone(harness):
    """D16: every path a failed run's message names exists afterwards: a failure, a failure
    beside a ``DIR.failed`` that is not evidence, and a DIR that changed during the capture."""
    (harness.work / "fail.py").write_text("import sys; sys.exit(3)\n")
    result = harness.profile("-o", "gone", "fail.py")
    harness.check(result, 1)
    assert_paths_exist(result)
    (harness.work / "busy.failed").mkdir()
    (harness.work / "busy.failed" / "mine.txt").write_text("not iket's")
    result = harness.profile("-o", "busy", "fail.py")
    harness.check(result, 1)
    assert "no evidence kept" in result.stderr
    assert_paths_exist(result)


def test_a_dir_that_changed_during_the_capture(harness):
    """D16: the workload makes DIR something else; the new capture is kept as evidence, and the
    message names where, not a removed staging folder."""
    (harness.work / "spoil.py").write_text(
        "import os\n"
        "def workload():\n"
        "    if os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json'):\n"
        "        os.remove('cap/manifest.json')\n"
    )
    before = snapshot(harness.work / "cap")
    result = harness.profile("-o", "cap", "--clobber", "spoil.py:workload")
    harness.check(result, 2, "changed during the capture", previous=False)
    assert "the new capture was not published" in result.stderr
    assert_paths_exist(result)
    assert manifest.read(harness.work / "cap.failed")["status"] == "failed"
    del before["manifest.json"]
    assert snapshot(harness.work / "cap") == before, "the changed DIR is left as the workload made it"
