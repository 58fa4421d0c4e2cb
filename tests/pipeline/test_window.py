"""``iket_cli.window`` in a real Python process, against a stand-in of the session's C ABI
(tests/fakes/session_double.c, built here with the system's C compiler: NVIDIA's library needs
a GPU driver). Each case runs a script that opens windows, then reads what it left."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iket_cli.model import manifest

from conftest import FIXTURES, run_iket

ROOT = Path(__file__).resolve().parents[2]


def run_script(tmp_path: Path, library: Path, body: str, trace: str = "plain", **env: str):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    calls = tmp_path / "calls.txt"
    full = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "IKET_CLI_SESSION_LIBRARY": str(library),
        "IKET_DOUBLE_TRACE": str(FIXTURES / "session" / f"{trace}.trace.json"),
        "IKET_DOUBLE_CALLS": str(calls),
        **env,
    }
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=full, capture_output=True, text=True
    )
    called = [line.split()[0] for line in calls.read_text().splitlines()] if calls.exists() else []
    return done, called


def test_a_window_is_a_published_capture_and_the_injection_keeps_off_the_terminal(tmp_path, library):
    done, called = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        print("before", flush=True)
        with iket_cli.window("out") as w:
            print("inside", flush=True)
        print("after", w.capture.output_dir.name, w.capture.manifest["status"])
    """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before", "inside", "after out ok"]
    assert "IketInjectionManager" not in done.stdout + done.stderr
    # one handle kept for the process (run-iket 4.8.1's design): cleared, never destroyed
    assert called == ["Create", "OptionsInit", "SetOptions", "Start", "Stop", "SaveTrace", "ClearTraceData"]
    out = tmp_path / "out"
    record = manifest.read(out)
    assert record["target"]["kind"] == "window" and record["target"]["spec"].endswith("script.py:4")
    window = record["window"]
    assert (window["number"], window["max_ts_cnt_per_warp"], window["context_buffer_size"]) == (
        1,
        256,
        512 << 20,
    )
    (process,) = record["processes"]
    assert set(process["artifacts"]) == {"trace_json", "perfetto", "pftrace_gz", "html"}
    assert (process["ranges"], process["markers"]) == (1, 1)
    log = (out / "iket.log").read_text()
    assert log.count("[IketInjectionManager]") == 4 and "session started" in log
    assert record["completeness"]["complete"] is True and "trace" in record["completeness"]["checked"]
    assert window["skipped_modules"] == 0
    assert not list(tmp_path.glob(".out.iket-*")) and not list(tmp_path.glob("*.lock"))
    shown = run_iket("show", out, "--format", "json", cwd=tmp_path)
    assert shown.code == 0, shown
    kernel = json.loads(shown.stdout)["processes"][0]["kernels"][0]
    assert kernel["ranges"][0]["durations"]["count"] == 1 and kernel["markers"][0]["count"] == 1


def test_a_block_that_raises_keeps_its_evidence_and_the_exception_goes_on(tmp_path, library):
    done, called = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        try:
            with iket_cli.window("out"):
                raise ValueError("the model diverged")
        except ValueError as error:
            print("caught", error)
    """,
    )
    assert done.returncode == 0 and done.stdout.strip() == "caught the model diverged", done.stderr
    assert called[-3:] == ["Stop", "SaveTrace", "ClearTraceData"]
    assert not (tmp_path / "out").exists()
    record = manifest.read(tmp_path / "out.failed")
    assert record["status"] == "failed" and "ValueError: the model diverged" in record["error"]["message"]
    assert list((tmp_path / "out.failed").glob("iket_pid_*.trace.json"))


def test_windows_in_one_process_are_captures_of_their_own(tmp_path, library):
    done, _ = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        from iket_cli import IketError

        @iket_cli.window("step{n}")
        def step(i):
            return i * 2

        print([step(i) for i in range(3)])
        with iket_cli.window("same"):
            pass
        try:
            with iket_cli.window("same"):
                print("never")
        except IketError as error:
            print("refused:", error.message, error.exit_code)
        with iket_cli.window("same", clobber=True) as w:
            pass
        print(w.capture.manifest["window"]["number"])
    """,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[0, 2, 4]" and lines[-1] == "6"
    assert lines[1].startswith("refused: output directory same holds a previous capture")
    assert [manifest.read(tmp_path / f"step{n}")["window"]["number"] for n in (1, 2, 3)] == [1, 2, 3]


def test_a_second_window_is_refused_where_the_machine_says_one(tmp_path, library):
    """Where a later window was seen to kill the process (``IKET_CLI_SESSION_WINDOWS=1``: not
    run-iket 4.8.1's session, which lived twelve windows a process on the GPU): the second
    window is refused before anything starts, saying why and what to do; the first capture
    stands; a window whose session never started does not count."""
    done, called = run_script(
        tmp_path,
        library,
        """
        import os
        import iket_cli
        from iket_cli import IketError

        library = os.environ["IKET_CLI_SESSION_LIBRARY"]
        os.environ["IKET_CLI_SESSION_LIBRARY"] = "/nonexistent/lib.so"
        try:
            with iket_cli.window("never"):
                pass
        except IketError as error:
            print("no library:", error.message[:40])
        os.environ["IKET_CLI_SESSION_LIBRARY"] = library
        with iket_cli.window("first"):
            pass
        try:
            with iket_cli.window("second"):
                print("ran")
        except IketError as error:
            print("refused:", error.message)
            print("hint:", error.hint)
            print("code:", error.exit_code)
    """,
        IKET_CLI_SESSION_WINDOWS="1",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("no library: cannot load /nonexistent/lib.so")
    assert lines[1].startswith("refused: a second window in this process was not opened (the first: ")
    assert "SIGSEGV" in lines[1] and "IKET_CLI_SESSION_WINDOWS=any" in lines[2] and lines[3] == "code: 1"
    assert "ran" not in lines
    assert manifest.read(tmp_path / "first")["status"] == "ok"
    assert sorted(p.name for p in tmp_path.iterdir() if "second" in p.name) == []
    assert called.count("Start") == 1, called


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"IKET_DOUBLE_FAIL": "Start=8"}, "IKET's session refused Start: INVALID_STATE (8)"),
        ({"IKET_DOUBLE_VERSION": "2"}, "speaks session ABI 2.0"),
        ({"IKET_CLI_SESSION_LIBRARY": "/nonexistent/libiket_injection.so"}, "cannot load"),
    ],
)
def test_a_session_that_cannot_start_leaves_nothing(tmp_path, library, env, said):
    done, called = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        try:
            with iket_cli.window("out"):
                print("never")
        except iket_cli.IketError as error:
            print(error.message, "|", error.hint)
    """,
        **env,
    )
    assert done.returncode == 0 and said in done.stdout and "never" not in done.stdout, done
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["script.py", *(["calls.txt"] if called else [])]
    )
    if called:
        assert called[-1] == "ClearTraceData"


def test_a_window_that_lost_records_says_so(tmp_path, library):
    done, _ = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        with iket_cli.window("out", max_ts_cnt_per_warp=1) as w:
            pass
        print(w.capture.manifest["completeness"]["losses"][0]["cause"])
    """,
        trace="budget1",
    )
    assert done.returncode == 0 and done.stdout.strip() == "budget", done.stderr
    record = manifest.read(tmp_path / "out")
    assert record["completeness"]["complete"] is False and record["window"]["max_ts_cnt_per_warp"] == 1
    (loss,) = record["completeness"]["losses"]
    assert loss["budget"] == 1 and "raise the budget of 1 timestamps per warp" in loss["fix"]
    assert "max_ts_cnt_per_warp=2 in iket_cli.window" in loss["fix"]
    shown = run_iket("show", tmp_path / "out", cwd=tmp_path)
    assert "INCOMPLETE" in shown.stdout + shown.stderr, shown


def test_a_windows_trace_is_read_once_to_judge_export_lint_and_report_it(tmp_path, library):
    done, _ = run_script(
        tmp_path,
        library,
        """
        from iket_cli.model import trace
        reads = []
        load = trace.load
        trace.load = lambda *a, **k: reads.append(a[0]) or load(*a, **k)
        import iket_cli
        with iket_cli.window("out") as w:
            pass
        print(len(reads), sorted(p.name for p in w.capture.output_dir.iterdir()))
    """,
    )
    assert done.returncode == 0, done.stderr
    count, _, files = done.stdout.partition(" ")
    assert count == "1", done.stdout
    assert ".html" in files and ".pftrace" in files and "trace.json" in files


def test_a_budget_the_session_dies_of_is_refused_as_the_window_is_made(tmp_path, library):
    done, called = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        from iket_cli.errors import UsageError
        try:
            iket_cli.window("out", max_ts_cnt_per_warp=300)
        except UsageError as error:
            print(error.exit_code, error.message)
        with iket_cli.window("out", max_ts_cnt_per_warp=256):
            pass
        print("256 opened")
    """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "2 max_ts_cnt_per_warp=300 in an in-process session: run-iket 4.8.1's session kills its "
        "process with more than 256 timestamps a warp unless its device buffer is sized to the "
        "kernel's warps",
        "256 opened",
    ]
    assert called.count("Create") == 1, "the refused window never reached the library"


def test_a_refused_save_keeps_the_evidence_and_says_which_call(tmp_path, library):
    done, called = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        try:
            with iket_cli.window("out"):
                print("inside", flush=True)
        except iket_cli.IketError as error:
            print(error.message, error.exit_code)
    """,
        IKET_DOUBLE_FAIL="SaveTrace=13",
    )
    assert done.returncode == 0 and "IKET's session refused SaveTrace: IO_ERROR (13) 1" in done.stdout, done
    assert called[-1] == "ClearTraceData" and not (tmp_path / "out").exists()
    assert manifest.read(tmp_path / "out.failed")["status"] == "failed"


def test_bad_options_are_refused_before_anything_runs(tmp_path, library):
    done, called = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        for options in ({"postprocess": "pdf"}, {"log_level": "debug"}):
            try:
                iket_cli.window("out", **options)
            except iket_cli.IketError as error:
                print(error.message, error.exit_code)
    """,
    )
    assert done.stdout.splitlines() == ["unknown postprocess 'pdf' 2", "unknown log_level 'debug' 2"], done
    assert called == []


def test_a_capture_that_appears_at_dir_during_the_block_is_kept_not_replaced(tmp_path, library):
    """``clobber`` was decided at open only: a capture another run published at DIR while the
    block ran was replaced at publish. Now it is kept, and the window's capture is evidence."""
    done, _ = run_script(
        tmp_path,
        library,
        f"""
        import shutil
        import iket_cli
        from iket_cli.errors import IketError
        try:
            with iket_cli.window("out"):
                shutil.copytree({str(FIXTURES / "affine")!r}, "out")
        except IketError as error:
            print("refused:", error.message)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "holds a capture now" in done.stdout, done.stdout
    assert (tmp_path / "out" / "iket_pid_0x204.trace.json").is_file()  # the other run's, as it was
    assert manifest.read(tmp_path / "out.failed")["status"] == "failed"
    assert not [p for p in tmp_path.iterdir() if ".iket-staging-" in p.name]


def test_each_window_of_a_process_is_a_capture_of_its_own_that_names_the_others(tmp_path, library):
    """Three windows of one process (``{n}``): three captures, each with its number, the process
    and the windows before it; ``iket diff`` of two of them says they are one process's."""
    done, _ = run_script(
        tmp_path,
        library,
        """
        import iket_cli
        step = iket_cli.window("step{n}")(lambda: None)
        for _ in range(3):
            step()
        """,
    )
    assert done.returncode == 0, done.stderr
    records = [manifest.read(tmp_path / f"step{n}") for n in (1, 2, 3)]
    assert [r["window"]["number"] for r in records] == [1, 2, 3]
    assert len({r["window"]["pid"] for r in records}) == 1
    assert [w["number"] for w in records[2]["window"]["earlier"]] == [1, 2]
    shown = run_iket("show", tmp_path / "step3", cwd=tmp_path)
    assert "window 3 of process" in shown.stderr and "its earlier windows:" in shown.stderr, shown
    compared = run_iket("diff", tmp_path / "step1", tmp_path / "step3", "--fail-over", "5%", cwd=tmp_path)
    assert compared.code == 0, compared
    assert "BASE and NEW are windows 1 and 3 of one process" in compared.stderr


def test_the_stand_in_dies_as_the_gpu_did_once_a_module_loaded_inside_a_window(tmp_path, library):
    """run-iket 4.8.1 on the H100: a later session died once a CUDA module had been loaded after
    the first began. The stand-in (``start-after-load``) does the same, so the refusal and the
    isolation are tested against a library that dies, not one that always lives."""
    body = """
        import ctypes, os, iket_cli
        library = ctypes.CDLL(os.environ["IKET_CLI_SESSION_LIBRARY"])
        with iket_cli.window("one"):
            if os.environ.get("LOAD") == "1":
                library.IketDoubleLoadModule()  # the kernel's module, loaded inside the window
        print("first window ok", flush=True)
        with iket_cli.window("two"):
            pass
        print("second window ok", flush=True)
        """
    crash = {"IKET_DOUBLE_CRASH": "start-after-load"}
    for name in "abc":
        (tmp_path / name).mkdir()
    lived, _ = run_script(tmp_path / "a", library, body, **crash, LOAD="0")
    assert lived.returncode == 0 and "second window ok" in lived.stdout, lived.stderr
    died, _ = run_script(tmp_path / "b", library, body, **crash, LOAD="1")
    assert (
        died.returncode == -11 and "first window ok" in died.stdout and "second window ok" not in died.stdout
    )
    refused, _ = run_script(tmp_path / "c", library, body, **crash, LOAD="1", IKET_CLI_SESSION_WINDOWS="1")
    assert refused.returncode == 1 and "a second window in this process was not opened" in refused.stderr
