"""``iket profile --window`` and ``--one-pass`` through the real CLI: the workload runs once,
under iket's hook, NVIDIA's session (here its C stand-in, tests/fakes/session_double.c) in
its own process; the faults a window can meet, each with its one-line error and exit code."""

from __future__ import annotations

import json
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
