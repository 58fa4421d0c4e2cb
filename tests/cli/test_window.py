"""``iket profile --window`` and ``--one-pass`` through the real CLI: the workload runs once,
under iket's hook, NVIDIA's session (here its C stand-in, tests/fakes/session_double.c) in
its own process; the faults a window can meet, each with its one-line error and exit code."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from iket_cli.model import manifest

from conftest import run_iket, session_env

STEPPER = """
import os, signal, sys
def step(i):
    print("step", i, flush=True)
    if os.environ.get("DIE_AT") == str(i):
        os.kill(os.getpid(), signal.SIGABRT)
    if os.environ.get("RAISE_AT") == str(i):
        raise ValueError("diverged")
    return i
"""
WORK = """
from stepper import step
for i in range(4):
    step(i)
print("done", flush=True)
"""


@pytest.fixture
def work(tmp_path):
    (tmp_path / "stepper.py").write_text(textwrap.dedent(STEPPER))
    (tmp_path / "work.py").write_text(textwrap.dedent(WORK))
    return tmp_path


def test_a_window_around_one_call_in_one_run(work, library):
    done = run_iket("profile", "work.py", "--window", "stepper:step", "--calls", "2", "-o", "out", "--json",
                    cwd=work, env=session_env(library))  # fmt: skip
    assert done.code == 0, done
    record = json.loads(done.stdout)
    assert record == manifest.read(work / "out")
    assert record["window"]["function"] == "stepper:step" and record["window"]["calls"] == [2, 2]
    assert record["window"]["seen"] == 2  # the run was ended once the window was saved
    assert "step 1" in done.stderr and "step 2" not in done.stderr  # the workload's output, --json: on stderr
    assert record["tracker"]["mode"] == "none" and record["run_iket_argv"] == []
    assert "iket: call 2 of stepper:step, in the live process (one run of" in done.stderr
    shown = run_iket("show", "out", cwd=work)
    assert "this capture is call 2 of stepper:step, in the live process" in shown.stderr, shown
    (process,) = record["processes"]
    assert process["kernels"] == [
        {"name": "profiled_affine_kernel", "short": "profiled_affine_kernel", "launches": 1}
    ]
    assert {"trace_json", "perfetto", "html", "pftrace_gz"} <= set(process["artifacts"])
    assert (
        "IketInjectionManager" not in done.stderr
        and "IketInjectionManager" in (work / "out" / "iket.log").read_text()
    )
    assert sorted(p.name for p in (work / "out").iterdir() if p.is_dir()) == []
    text = (work / "out" / process["artifacts"]["trace_json"]["path"]).read_text()
    assert text.startswith('{"graphLaunches":{}')  # the session's indented JSON in the decoder's layout


def test_no_stop_after_runs_to_the_end_and_a_range_of_calls_is_one_window(work, library):
    done = run_iket("profile", "work.py", "--window", "stepper:step", "--calls", "2-3", "--no-stop-after",
                    "-o", "out", cwd=work, env=session_env(library))  # fmt: skip
    assert done.code == 0 and "done" in done.stdout, done
    window = manifest.read(work / "out")["window"]
    assert window["calls"] == [2, 3] and window["seen"] == 4


def test_one_pass_is_the_whole_run_in_one_session(work, library):
    done = run_iket("profile", "work.py", "--one-pass", "-o", "out", cwd=work, env=session_env(library))
    assert done.code == 0 and "done" in done.stdout, done
    record = manifest.read(work / "out")
    assert record["window"]["one_pass"] is True and record["window"]["processes"] == 1
    assert record["processes"][0]["ranges"] == 1


#: --window around one call of the stand-in workload's step (the cases add the calls).
W = ["--window", "stepper:step", "--calls"]


@pytest.mark.parametrize(
    ("args", "env", "code", "said"),
    [
        (
            [*W, "2"],
            {"DIE_AT": "1"},
            1,
            "the workload died with status -6 (SIGABRT) inside the window, during call 2",
        ),
        ([*W, "9"], {}, 1, "stepper:step was called 4 times in the run; --calls needs 9"),
        ([*W, "2"], {"RAISE_AT": "1"}, 1, "call 2 of stepper:step raised inside the window"),
        ([*W, "2"], {"IKET_DOUBLE_FAIL": "Start=8"}, 1, "IKET's in-process session failed"),
        ([*W, "2"], {"IKET_DOUBLE_FAIL": "SaveTrace=13"}, 1, "IKET's in-process session failed"),
        ([*W, "last"], {}, 2, "--window cannot open at the last call"),
        (
            ["--window", "stepper:nothing"],
            {},
            2,
            "--window stepper:nothing: stepper.py defines no function nothing",
        ),
        ([*W, "1", "--extract", "stepper:step"], {}, 2, "--extract and --window cannot go together"),
        (["--one-pass", "--repeat", "2"], {}, 2, "--repeat does not go with --one-pass"),
        (["--one-pass"], {"IKET_DOUBLE_FAIL": "Start=8"}, 1, "refused Start: INVALID_STATE (8)"),
    ],
)
def test_each_fault_is_one_line_with_its_exit_code_and_the_evidence_kept(
    work, library, args, env, code, said
):
    done = run_iket("profile", "work.py", *args, "-o", "out", cwd=work, env=session_env(library, **env))
    assert done.code == code and said in done.stderr, done
    assert "Traceback" not in done.stderr and not (work / "out").exists()
    errors = [line for line in done.stderr.splitlines() if line.startswith("iket: error")]
    assert len(errors) == 1
    if code == 1:  # a run that started keeps its evidence, its window's trace where it was saved
        record = manifest.read(work / "out.failed")
        assert record["status"] == "failed" and said.split(":")[0] in record["error"]["message"]
    assert not list(work.glob(".out.iket-*"))


def test_one_pass_refuses_a_command(work, library):
    done = run_iket("profile", "--one-pass", "-o", "out", "--", "true", cwd=work, env=session_env(library))
    assert (
        done.code == 2 and "--one-pass runs a Python workload's session in its own process" in done.stderr
    ), done


def test_an_iket_toml_job_takes_window_and_one_pass(work, library):
    (work / "iket.toml").write_text(
        'output = "runs"\n\n'
        '[[jobs]]\nname = "call2"\ntarget = "work.py"\nwindow = "stepper:step"\ncalls = 2\n\n'
        '[[jobs]]\nname = "whole"\ntarget = "work.py"\none_pass = true\n'
    )
    done = run_iket("run", cwd=work, env=session_env(library))
    assert done.code == 0, done
    assert manifest.read(work / "runs" / "call2")["window"]["calls"] == [2, 2]
    assert manifest.read(work / "runs" / "whole")["window"]["one_pass"] is True
    (work / "iket.toml").write_text('[[jobs]]\nname = "bad"\ntarget = "work.py"\nwindow = " "\n')
    refused = run_iket("run", cwd=work, env=session_env(library))
    assert refused.code == 2 and "jobs[0].window: '' names no function" in refused.stderr, refused


def test_the_timeout_covers_the_window_and_says_where_it_was(work, library):
    (work / "stepper.py").write_text(
        textwrap.dedent(STEPPER).replace(
            "    return i", "    if i == 1:\n        import time; time.sleep(60)\n    return i"
        )
    )
    done = run_iket(
        "profile", "work.py", *W, "2", "--timeout", "3", "-o", "out", cwd=work, env=session_env(library)
    )
    assert done.code == 124 and "inside the window (call 2 of stepper:step)" in done.stderr, done
    assert manifest.read(work / "out.failed")["status"] == "timeout"


def test_ctrl_c_inside_the_window_stops_the_session_and_keeps_its_trace(work, library):
    import signal
    import time

    from conftest import start_iket

    (work / "stepper.py").write_text(
        textwrap.dedent(STEPPER).replace(
            "    return i", "    if i == 1:\n        import time; time.sleep(60)\n    return i"
        )
    )
    env = {**os.environ, **session_env(library, IKET_DOUBLE_CALLS=str(work / "calls.txt"))}
    proc = start_iket("profile", "work.py", *W, "2", "-o", "out", cwd=work, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = list(work.glob(".out.iket-staging-*/window/window.json"))
        if states and json.loads(states[0].read_text()).get("open") == 2:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    called = [line.split()[0] for line in (work / "calls.txt").read_text().splitlines()]
    assert called[-3:] == [
        "Stop",
        "SaveTrace",
        "ClearTraceData",
    ]  # the session stopped: patched kernels restored
    assert manifest.read(work / "out.failed")["status"] == "interrupted"
    assert list((work / "out.failed" / "window").glob("iket_pid_*.trace.json"))


def test_modules_the_session_could_not_inspect_are_summed_up_not_listed(work, library):
    env = session_env(library, IKET_DOUBLE_SKIPPED="3")
    done = run_iket("profile", "work.py", *W, "2", "-o", "out", cwd=work, env=env)
    assert done.code == 0 and "IKET skipped 3 CUDA module(s) it could not inspect" in done.stderr, done
    assert "could not inspect a CUDA module" not in done.stderr + done.stdout
    assert (work / "out" / "iket.log").read_text().count("could not inspect a CUDA module") == 3


def test_one_pass_gives_each_python_process_its_own_window(work, library):
    (work / "spawns.py").write_text(
        "import subprocess, sys\n"
        "for i in range(2):\n"
        "    subprocess.run([sys.executable, '-c', 'print(\"child\", flush=True)'], check=True)\n"
    )
    done = run_iket("profile", "spawns.py", "--one-pass", "-o", "out", cwd=work, env=session_env(library))
    assert done.code == 0 and done.stdout.count("child") == 2, done
    record = manifest.read(work / "out")
    assert record["window"]["processes"] == 3 and len(record["processes"]) == 3  # the parent and 2 children
    assert len({p["pid_hex"] for p in record["processes"]}) == 3


def test_a_library_that_cannot_load_in_the_workload_is_said_not_a_traceback(work, library):
    env = session_env(library, IKET_DOUBLE_VERSION="2")  # ABI 2.0: refused as the window opens
    done = run_iket("profile", "work.py", *W, "2", "-o", "out", cwd=work, env=env)
    assert (
        done.code == 1 and "IKET's in-process session failed: " in done.stderr and "ABI 2.0" in done.stderr
    ), done
    assert "Traceback" not in done.stderr + done.stdout


def test_a_budget_loss_in_one_pass_says_the_budget_and_how_to_raise_it(work, library):
    env = session_env(library, trace="budget1")
    done = run_iket(
        "profile", "work.py", "--one-pass", "--max-ts-cnt-per-warp", "1", "-o", "out", cwd=work, env=env
    )
    assert done.code == 0, done
    assert "INCOMPLETE: 1 launch of profiled_affine_kernel recorded nothing" in done.stderr
    assert "raise the budget of 1 timestamps per warp, e.g. --max-ts-cnt-per-warp 2" in done.stderr
    (loss,) = manifest.read(work / "out")["completeness"]["losses"]
    assert (loss["cause"], loss["budget"]) == ("budget", 1)
    tight = ["--one-pass", "--max-ts-cnt-per-warp", "1", "--strict"]
    strict = run_iket("profile", "work.py", *tight, "-o", "out2", cwd=work, env=env)
    assert strict.code == 1 and (work / "out2" / "manifest.json").is_file(), strict  # published, incomplete


def test_a_budget_the_session_dies_of_is_refused_before_the_workload_runs(work, library):
    """run-iket 4.8.1's session killed its process above 256 timestamps a warp (H100): refused,
    one line, exit 2, the workload never started and nothing written; the variable opens it anyway."""
    env = session_env(library)
    calls = work / "calls.txt"
    env["IKET_DOUBLE_CALLS"] = str(calls)
    for way in (["--one-pass"], [*W, "2"]):
        done = run_iket(
            "profile", "work.py", *way, "--max-ts-cnt-per-warp", "512", "-o", "out", cwd=work, env=env
        )
        assert done.code == 2 and "Traceback" not in done.stderr, done
        said = [line for line in done.stderr.splitlines() if line.startswith("iket: error:")]
        assert said == [
            "iket: error: --max-ts-cnt-per-warp 512 in an in-process session: run-iket 4.8.1's session "
            "kills its process with more than 256 timestamps a warp unless its device buffer is sized to the "
            "kernel's warps"
        ], done.stderr
        assert "two passes" in done.stderr and "IKET_CLI_SESSION_BUDGET_UNSAFE=1" in done.stderr
        assert (
            not calls.exists() and not (work / "out").exists() and "step 0" not in done.stdout + done.stderr
        )
    at_256 = run_iket(
        "profile", "work.py", "--one-pass", "--max-ts-cnt-per-warp", "256", "-o", "a", cwd=work, env=env
    )
    assert at_256.code == 0, at_256
    risked = run_iket(
        "profile", "work.py", "--one-pass", "--max-ts-cnt-per-warp", "512", "-o", "b", cwd=work,
        env={**env, "IKET_CLI_SESSION_BUDGET_UNSAFE": "1"},
    )  # fmt: skip
    settings = manifest.read(work / "b")["window"]["settings"] if risked.code == 0 else {}
    assert settings.get("max_ts_cnt_per_warp") == 512, risked


def test_a_loss_at_the_default_budget_points_to_the_two_passes(work, library):
    done = run_iket(
        "profile", "work.py", "--one-pass", "-o", "out", cwd=work, env=session_env(library, trace="budget1")
    )
    assert done.code == 0, done
    (loss,) = manifest.read(work / "out")["completeness"]["losses"]
    assert loss["budget"] == 256 and "capture with the two passes" in loss["fix"], loss
    assert "--max-ts-cnt-per-warp 512" not in done.stderr, "no fix the session dies of"


COUNTING = """
import atexit, sys
from iket_cli.model import trace
reads = []
load = trace.load
trace.load = lambda *a, **k: reads.append(a[0]) or load(*a, **k)
atexit.register(lambda: print("trace loads:", len(reads), file=sys.stderr))
from iket_cli.cli import main
sys.argv = ["iket", *sys.argv[1:]]
main()
"""


def test_one_pass_reads_each_trace_twice_judged_then_exported_linted_and_reported(work, library):
    """The CLI's process reads a window's trace for its completeness, then once for the
    Perfetto export, the lint and the report (the export hands it on): two reads, not three."""
    import subprocess
    import sys

    env = {**os.environ, **session_env(library)}
    done = subprocess.run(
        [sys.executable, "-c", COUNTING, "profile", "work.py", "--one-pass", "-o", "out"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "trace loads: 2" in done.stderr, done.stderr[-2000:]
    assert {p.suffix for p in (work / "out").iterdir()} >= {".html", ".pftrace", ".json"}


def test_a_range_of_calls_that_outruns_the_run_is_incomplete_and_says_what_it_holds(work, library):
    """``--calls 3-9`` of a run that made 4 calls: the window was closed at the process's exit
    and published as "calls 3-9", complete. Now it says it holds calls 3-4, is INCOMPLETE, and
    ``--strict`` exits 1."""
    env = session_env(library)
    done = run_iket("profile", "work.py", "--window", "stepper:step", "--calls", "3-9", "--no-stop-after",
                    "-o", "out", "--json", cwd=work, env=env)  # fmt: skip
    assert done.code == 0, done
    record = manifest.read(work / "out")
    assert record["window"]["calls"] == [3, 4] and record["window"]["asked"] == [3, 9]
    (loss,) = [loss for loss in record["completeness"]["losses"] if loss["cause"] == "window-calls"]
    assert "the run made 4, so it holds calls 3-4 only" in loss["message"]
    assert record["completeness"]["complete"] is False and "INCOMPLETE" in done.stderr
    strict = run_iket("profile", "work.py", "--window", "stepper:step", "--calls", "3-9", "--no-stop-after",
                      "-o", "out2", "--strict", cwd=work, env=env)  # fmt: skip
    assert strict.code == 1, strict


@pytest.mark.parametrize("calls", ["1-", "１", "3-2", "0"])
def test_calls_that_are_not_calls_are_refused(work, library, calls):
    done = run_iket("profile", "work.py", "--window", "stepper:step", "--calls", calls, "-o", "out",
                    cwd=work, env=session_env(library))  # fmt: skip
    assert done.code == 2 and "is not N, A-B or last" in done.stderr, done


def test_a_module_is_not_a_function_to_window(work, library):
    (work / "stepper.py").write_text(textwrap.dedent(STEPPER) + "import json\n")
    done = run_iket("profile", "work.py", "--window", "stepper:json", "-o", "out", cwd=work,
                    env=session_env(library))  # fmt: skip
    assert done.code == 2 and "is a module stepper.py imports, not a function" in done.stderr, done


def test_a_timeout_that_is_not_a_number_of_seconds_is_refused(work):
    for given in ("nan", "inf", "-1", "0"):
        done = run_iket("profile", "work.py", "--timeout", given, "-o", "out", cwd=work)
        assert done.code == 2 and "--timeout" in done.stderr, done


def test_a_call_that_raised_and_was_caught_is_said_as_caught(work, library):
    """The run ended well (the workload caught FUNC's exception): not "failed with status 0"."""
    (work / "work.py").write_text(
        "from stepper import step\ntry:\n    step(2)\nexcept ValueError:\n    print('caught', flush=True)\n"
    )
    done = run_iket("profile", "work.py", "--window", "stepper:step", "--calls", "1", "-o", "out",
                    cwd=work, env={**session_env(library), "RAISE_AT": "2"})  # fmt: skip
    assert done.code == 1, done
    assert "raised inside the window; the run caught it" in done.stderr and "status 0" not in done.stderr


def test_a_session_that_dies_on_a_budget_is_said_with_its_signal_and_leaves_evidence(work, library):
    """Above 256 timestamps a warp run-iket 4.8.1's session aborted its process after collecting
    ("free(): invalid next size"); the stand-in does so too (``budget-over=256``): iket refuses
    such a budget before anything runs, and where told to try anyway, says how the run died."""
    env = {**session_env(library), "IKET_DOUBLE_CRASH": "budget-over=256"}
    refused = run_iket("profile", "work.py", "--one-pass", "--max-ts-cnt-per-warp", "512", "-o", "out",
                       cwd=work, env=env)  # fmt: skip
    assert refused.code == 2 and "kills its process with more than 256 timestamps a warp" in refused.stderr
    tried = run_iket("profile", "work.py", "--one-pass", "--max-ts-cnt-per-warp", "512", "-o", "out",
                     cwd=work, env={**env, "IKET_CLI_SESSION_BUDGET_UNSAFE": "1"})  # fmt: skip
    assert tried.code == 1, tried
    assert "SIGABRT" in tried.stderr and "Traceback" not in tried.stderr
    assert manifest.read(work / "out.failed")["status"] == "failed" and not (work / "out").exists()


def test_a_func_the_module_imports_in_an_if_is_a_target(tmp_path, library):
    """``model_step.affine`` is imported from one of two kernel modules under an ``if``: the
    module binds it, so ``--window model_step:affine`` is a target (it was refused as a name the
    module does not define, on the GPU with examples/model_step.py)."""
    (tmp_path / "kernel_a.py").write_text("def affine(i):\n    return i\n")
    (tmp_path / "steps.py").write_text(
        "import os\nif os.environ.get('KERNEL') == 'b':\n    from kernel_b import affine\n"
        "else:\n    from kernel_a import affine\n\ndef step(i):\n    return affine(i)\n"
    )
    (tmp_path / "work.py").write_text("from steps import step\nfor i in range(3):\n    step(i)\n")
    done = run_iket("profile", "work.py", "--window", "steps:affine", "--calls", "2", "-o", "out",
                    cwd=tmp_path, env=session_env(library))  # fmt: skip
    assert done.code == 0, done
    assert manifest.read(tmp_path / "out")["window"]["calls"] == [2, 2]
