"""iket's pytest plugin, run by pytest's own ``pytester`` on marked tests in a fresh pytest,
against the session's C stand-in (tests/fakes/session_double.c): captures kept, gates that pass
and fail, a skip where no session can run, and the plugin off (iket_cli unimported) unless asked."""

from __future__ import annotations

import json
import textwrap

import pytest

from iket_cli.model import manifest

from conftest import session_env

pytest_plugins = ["pytester"]

TESTS = """
import pytest

def kernel():
    return 1  # the stand-in session saves the seed kernel's trace: affine 192 ns, a mark

@pytest.mark.iket
def test_plain():
    assert kernel() == 1

@pytest.mark.iket(max={"affine": "1us"}, p50={"affine": 300})
def test_gate_passes():
    kernel()

@pytest.mark.iket(p50={"affine": "100ns"})
def test_gate_fails():
    kernel()

def test_unmarked():
    kernel()

def test_fixture(iket_window):
    cap = iket_window(kernel)
    assert cap.range("affine").p50 == 192
    with iket_window() as w:
        kernel()
    assert w.capture.range("affine").count == 1
"""


@pytest.fixture
def run(pytester, library, monkeypatch):
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_kernels=textwrap.dedent(TESTS))

    def go(*args):
        return pytester.runpytest_subprocess(*args)

    return go


def test_marked_tests_are_captured_and_gated(run, pytester):
    kept = pytester.path / "caps"
    result = run("--iket", str(kept), "--junitxml", "junit.xml", "-rA")
    result.assert_outcomes(passed=4, failed=1)
    text = result.stdout.str()
    assert "iket gate: 1 of 1 limit(s) exceeded" in text and "affine" in text and "OVER" in text
    folders = sorted(p.name for p in kept.iterdir())
    tests = ["fixture", "fixture-2", "gate_fails", "gate_passes", "plain"]
    assert folders == [f"test_kernels.py-test_{name}" for name in tests]
    record = manifest.read(kept / "test_kernels.py-test_plain")
    assert record["target"]["kind"] == "window" and record["status"] == "ok"
    junit = (pytester.path / "junit.xml").read_text()
    assert 'name="iket.affine.p50_ns" value="192"' in junit


def test_without_a_folder_captures_go_to_pytests_rotated_temp_not_the_systems(run, pytester, monkeypatch):
    system_temp = pytester.path / "system-temp"
    system_temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_temp))
    basetemp = pytester.path / "basetemp"
    result = run("--basetemp", str(basetemp), "-k", "plain or gate_fails")
    result.assert_outcomes(passed=1, failed=1)
    assert f"({basetemp / 'iket' / 'test_kernels.py-test_gate_fails'})" in result.stdout.str()
    assert sorted(p.name for p in (basetemp / "iket").iterdir()) == [
        "test_kernels.py-test_gate_fails",
        "test_kernels.py-test_plain",
    ]
    assert list(system_temp.iterdir()) == [], "nothing left in the system's temporary folder"


def test_all_tests_with_iket_all(run, pytester):
    result = run("--iket", str(pytester.path / "caps"), "--iket-all", "-k", "unmarked")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "caps" / "test_kernels.py-test_unmarked" / "manifest.json").is_file()


def test_a_baseline_passes_itself_and_a_slower_kernel_fails_with_the_diff_table(run, pytester):
    base = pytester.path / "base"
    run("--iket", str(base), "-k", "plain").assert_outcomes(passed=1)
    same = run("--iket", str(pytester.path / "new"), "--iket-baseline", str(base), "-k", "plain")
    same.assert_outcomes(passed=1)
    trace = next((base / "test_kernels.py-test_plain").glob("iket_pid_*.trace.json"))
    slowed = json.loads(trace.read_text())  # the baseline made twice as fast: the new one is slower
    for launch in slowed["launches"]:
        for r in launch["ranges"]:
            r["endTs"] = r["startTs"] + (r["endTs"] - r["startTs"]) // 2
    trace.write_text(json.dumps(slowed, sort_keys=True, separators=(",", ":")))
    slower = run("--iket-baseline", str(base), "-k", "plain")
    slower.assert_outcomes(failed=1)
    text = slower.stdout.str()
    assert "iket: " in text and "affine" in text and "2.000x" in text


def test_no_session_here_skips_with_the_reason(run, monkeypatch):
    monkeypatch.setenv("IKET_CLI_SESSION_LIBRARY", "/nonexistent/libiket_injection.so")
    result = run("-rs", "-k", "plain or fixture")
    result.assert_outcomes(skipped=2)
    assert "iket: no IKET session here: cannot load /nonexistent/libiket_injection.so" in result.stdout.str()


def test_off_unless_asked_and_iket_cli_never_imported(pytester):
    pytester.makepyfile(test_plain="import sys\n\ndef test_it():\n    assert 'iket_cli' not in sys.modules\n")
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
    off = pytester.runpytest_subprocess("-p", "no:iket", "--iket", "x")
    assert off.ret == pytest.ExitCode.USAGE_ERROR  # the option is gone with the plugin
    assert "unrecognized arguments: --iket" in off.stderr.str()


def test_a_second_window_in_one_process_fails_its_test_in_iket_words(run, monkeypatch):
    """Without IKET_CLI_SESSION_AGAIN the first marked test is captured and the next fails,
    saying why and what to do (GPU: a later session can kill the process), no traceback."""
    monkeypatch.delenv("IKET_CLI_SESSION_AGAIN")
    result = run("-k", "plain or gate_passes", "--iket", "caps")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "iket: a second window in this process was not opened" in text
    assert "IKET_CLI_SESSION_AGAIN=1" in text and "Traceback" not in text and "pytest_support.py" not in text
