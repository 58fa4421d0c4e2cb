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


def test_several_windows_each_run_in_a_process_of_their_own(run, pytester, monkeypatch):
    """A machine where a later window killed the process (``IKET_CLI_SESSION_WINDOWS=1``; the
    stand-in dies on a second Start): every marked test is captured, each in a child of its own,
    its gates decided and its JUnit properties in the report; nothing is left staged."""
    monkeypatch.setenv("IKET_CLI_SESSION_WINDOWS", "1")
    monkeypatch.setenv("IKET_DOUBLE_CRASH", "second-start")
    result = run(
        "-k", "plain or gate_passes or gate_fails or unmarked", "--iket", "caps", "--junitxml", "j.xml"
    )
    result.assert_outcomes(passed=3, failed=1)
    text = result.stdout.str()
    assert "iket gate: 1 of 1 limit(s) exceeded" in text and "Traceback" not in text
    pids = set()
    for name in ("plain", "gate_passes", "gate_fails"):
        folder = pytester.path / "caps" / f"test_kernels.py-test_{name}"
        (trace,) = folder.glob("iket_pid_*.trace.json")
        pids.add(trace.name)
        assert manifest.read(folder)["status"] == "ok"
    assert len(pids) == 3, "each window in a process of its own"
    junit = (pytester.path / "j.xml").read_text()
    assert junit.count('name="iket.affine.p50_ns" value="192"') == 3
    assert not list((pytester.path / "caps").glob(".*iket-staging*"))


def test_every_window_test_runs_in_the_runs_own_process_by_default(run, pytester):
    """run-iket 4.8.1's session lives many windows a process (one kept handle): no child."""
    result = run("-k", "plain or gate_passes", "--iket", "caps")
    result.assert_outcomes(passed=2)
    traces = {t.name for t in (pytester.path / "caps").glob("*/iket_pid_*.trace.json")}
    assert len(traces) == 1, f"both windows in the run's own process: {traces}"


@pytest.mark.parametrize("crash, design", [("second-start", "kept"), ("start-after-destroy", "per-window")])
def test_in_one_process_a_later_window_kills_the_run_where_the_library_dies(run, monkeypatch, crash, design):
    """The stand-in dies as a library that cannot open a later session would (SIGSEGV at its
    Start): what the children spare the run."""
    monkeypatch.setenv("IKET_DOUBLE_CRASH", crash)
    monkeypatch.setenv("IKET_CLI_SESSION_DESIGN", design)
    result = run("-k", "plain or gate_passes", "--iket", "caps")
    assert result.ret not in (0, 1), "the whole pytest process died in its second window"


def test_a_crashed_test_fails_alone_with_its_signal_named_and_its_evidence_kept(
    pytester, library, monkeypatch
):
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(
        test_crash="import os, signal, pytest\n\n@pytest.mark.iket\ndef test_a():\n    pass\n\n"
        "@pytest.mark.iket\ndef test_crash():\n    os.kill(os.getpid(), signal.SIGSEGV)\n\n"
        "@pytest.mark.iket\ndef test_b():\n    pass\n"
    )
    result = pytester.runpytest_subprocess("--iket", "caps", "--iket-isolate", "-rA")
    result.assert_outcomes(passed=2, failed=1)
    text = result.stdout.str()
    assert "died after its setup: SIGSEGV (signal 11)" in text, text
    failed = pytester.path / "caps" / "test_crash.py-test_crash.failed"
    record = manifest.read(failed)
    assert record["status"] == "failed" and "SIGSEGV" in record["error"]["message"]
    assert not list((pytester.path / "caps").glob(".*")), "no staging folder or lock left"


def test_a_gate_on_an_incomplete_capture_fails_and_an_incomplete_baseline_fails(
    run, pytester, monkeypatch, library
):
    """The session lost every record (the H100's budget1 trace): a gate cannot pass on it, and a
    baseline that lost them fails the comparison, in iket's words."""
    for key, value in session_env(library, "budget1").items():
        monkeypatch.setenv(key, value)
    lossy = run("--iket", "lossy", "-k", "gate_passes or plain", "-rA", "--junitxml", "junit.xml")
    lossy.assert_outcomes(passed=1, failed=1)  # plain has no gate: captured, its loss in its properties
    text = lossy.stdout.str()
    assert "the gate cannot pass: this capture is INCOMPLETE" in text and "Traceback" not in text
    assert 'name="iket.incomplete"' in (pytester.path / "junit.xml").read_text()
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    against = run("--iket-baseline", "lossy", "-k", "plain")
    against.assert_outcomes(failed=1)
    assert "the gate cannot pass: the baseline" in against.stdout.str()


MARKS = {
    "positional": ("@pytest.mark.iket('max')", "takes keywords only"),
    "unknown": ("@pytest.mark.iket(maxx={'affine': '1us'})", "unknown keyword 'maxx'"),
    "unit": ("@pytest.mark.iket(max={'affine': '5 parsecs'})", "is not a duration"),
    "none": ("@pytest.mark.iket(max={'affine': None})", "is not a duration"),
    "nan": ("@pytest.mark.iket(max={'affine': float('nan')})", "is not a duration"),
    "not_a_gate": ("@pytest.mark.iket(p50='5us')", "is not a gate"),
    "clobber": ("@pytest.mark.iket(clobber=False)", "unknown keyword 'clobber'"),
    "budget": ("@pytest.mark.iket(max_ts_cnt_per_warp=-1)", "is not a budget of timestamps per warp"),
    "zero_budget": ("@pytest.mark.iket(max_ts_cnt_per_warp=0)", "is not a budget of timestamps per warp"),
    "buffer": ("@pytest.mark.iket(context_buffer_size='lots')", "is not a size"),
    "calls": ("@pytest.mark.iket(calls='3')", "calls= chooses calls of function="),
    "no_range": ("@pytest.mark.iket(max={'nosuch': '1us'})", "NO SUCH RANGE"),
}


@pytest.mark.parametrize("name", sorted(MARKS))
def test_a_bad_mark_fails_its_test_in_one_line_naming_the_key(pytester, library, monkeypatch, name):
    mark, said = MARKS[name]
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_marks=f"import pytest\n\n{mark}\ndef test_it():\n    pass\n")
    result = pytester.runpytest_subprocess("--iket", "caps")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert said in text and "Traceback" not in text and "pytest_support.py" not in text, text
    failures = text.split("short test summary")[0]
    assert sum(line.startswith(("iket: ", "iket gate: ")) for line in failures.splitlines()) == 1, "said once"


def test_a_bad_fail_over_or_a_damaged_baseline_is_said_not_a_traceback(run, pytester):
    for given in ("abc", "5"):
        bad = run("--iket-baseline", "base", "--iket-fail-over", given, "-k", "plain")
        assert bad.ret == pytest.ExitCode.USAGE_ERROR
        assert "--iket-fail-over" in bad.stderr.str() and "Traceback" not in bad.stderr.str()
    base = pytester.path / "base"
    run("--iket", str(base), "-k", "plain").assert_outcomes(passed=1)
    trace = next((base / "test_kernels.py-test_plain").glob("iket_pid_*.trace.json"))
    trace.write_text("{damaged")
    damaged = run("--iket-baseline", str(base), "-k", "plain")
    damaged.assert_outcomes(failed=1)
    assert "cannot be read" in damaged.stdout.str() and "Traceback" not in damaged.stdout.str()


def test_two_test_ids_made_alike_keep_two_folders(pytester, library, monkeypatch):
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(
        test_ids="import pytest\n\n@pytest.mark.iket\n@pytest.mark.parametrize('p', ['a b', 'a-b'])\n"
        "def test_p(p):\n    pass\n"
    )
    pytester.runpytest_subprocess("--iket", "caps").assert_outcomes(passed=2)
    assert len(list((pytester.path / "caps").iterdir())) == 2


def test_a_capture_folder_that_cannot_be_made_fails_the_test_in_iket_words(pytester, library, monkeypatch):
    """``--iket`` under a file (root may write anywhere else): the window cannot be staged."""
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_ro="import pytest\n\n@pytest.mark.iket\ndef test_it():\n    pass\n")
    (pytester.path / "a-file").write_text("not a folder")
    result = pytester.runpytest_subprocess("--iket", str(pytester.path / "a-file" / "caps"))
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "iket: " in text and "Traceback" not in text and "pytest_support.py" not in text, text
