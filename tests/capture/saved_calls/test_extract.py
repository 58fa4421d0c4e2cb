"""``iket profile --extract`` and ``--replay`` through the real CLI.

The record run is a plain run of the workload (no run-iket); the passes replay the saved
calls under the real run-iket, with the test double replaying a recorded H200 capture
after each pass. The workload here takes numpy arrays and plain objects; the H200 checks
(scripts/gpu_extract.py) run the same with torch tensors, nn.Modules and real kernels.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from iket_cli.model import manifest

from conftest import profile_double, replay, run_iket, snapshot, start_iket

KERNELS = '''
import json, os
import numpy as np

LOG = os.environ.get("CALLS_LOG", "calls.log")


def _log(what, a):
    with open(LOG, "a") as out:
        out.write(json.dumps({"what": what, "pid": os.getpid(), "first": float(a.reshape(-1)[0]),
                              "rank": os.environ.get("RANK"),
                              "no_cache": os.environ.get("CUTE_DSL_NO_CACHE")}) + "\\n")


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, a):
        _log("apply", a)
        return a * self.k


def launch(a, b, scale=2.0, *, note=None):
    """Writes into b, as a kernel writes its output, and returns it."""
    _log("launch", a)
    b[:] = a * scale + 1
    return b


NOT_A_FUNCTION = 3
'''

MODEL = """
import os, sys, time
import numpy as np
from kernels import launch as run_kernel, Scaler
import kernels

steps = int(os.environ.get("STEPS", "3"))
print("model: start", flush=True)
scaler = Scaler(3)
for step in range(steps):
    a = np.arange(8, dtype=np.float32) + 10 * step
    b = np.zeros(8, dtype=np.float32)
    if step % 2:
        kernels.launch(a, b, scale=3.0, note={"step": step})
    else:
        run_kernel(a, b)
    scaler.apply(a)
    if os.environ.get("UNPICKLABLE") and step == 0:
        kernels.launch(a, b, note=lambda: 0)
    if os.environ.get("SLOW"):
        time.sleep(float(os.environ["SLOW"]))
print("model: end", flush=True)
if os.environ.get("FAIL"):
    sys.exit(int(os.environ["FAIL"]))
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def extract(double, work: Path, *args, env: dict | None = None, timeout: float = 120):
    """``iket profile`` with the double, the affine capture replayed after each pass."""
    return profile_double(double, work, *args, env=env, timeout=timeout)


def launch(double, work: Path, *args, env: dict | None = None):
    """``iket profile model.py --extract kernels:launch ARGS``."""
    return extract(double, work, "model.py", "--extract", "kernels:launch", *args, env=env)


def logged(work: Path) -> list[dict]:
    path = work / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def saved_inputs(capture: Path, call: int):
    """The saved arguments of ``call``, loaded as the replay loads them."""
    import sys

    from iket_cli.capture.hook import HOOK_DIR

    sys.path.insert(0, str(HOOK_DIR))
    try:
        import iket_load
        import iket_saved

        folder = capture / "extract"
        index = iket_saved.read_index(str(folder))
        (record,) = [c for c in index["calls"] if c["call"] == call]
        if not index["module"].endswith(".py") and index["path0"] in sys.path:
            __import__(index["module"])  # as the replay imports FUNC's module first
        return iket_load.load_part(
            str(folder / record["folder"]), "inputs", record["parts"]["inputs"], index["path0"]
        )
    finally:
        sys.path.remove(str(HOOK_DIR))


# -- record and replay ---------------------------------------------------------------


def test_records_the_chosen_call_and_the_passes_replay_only_it(work, double):
    result = launch(double, work, "--calls", "2", "-o", "cap", "--json")
    assert result.code == 0, result
    record = json.loads(result.stdout)
    assert manifest.validate(record) == []
    facts = record["extract"]
    assert facts["function"] == "kernels:launch" and facts["calls"] == [2]
    assert [a["name"] for a in facts["arguments"]] == ["a", "b", "scale", "note"]
    assert facts["arguments"][0] == {
        "call": 2,
        "kind": "array",
        "shape": [8],
        "dtype": "float32",
        "bytes": 32,
        "name": "a",
    }
    assert facts["record"]["status"] == "ok" and facts["replay"]["calls"] == [
        {"call": 2, "equal": True, "differences": []}
    ]
    # the record run stopped after call 2 (step 1): the model never reached its end
    assert "model: end" not in result.stdout + result.stderr
    calls = logged(work)
    launches = [c for c in calls if c["what"] == "launch"]
    # two calls in the record run, then the replay of call 2 in the tracker and capture passes
    assert [c["first"] for c in launches] == [0.0, 10.0, 10.0, 10.0]
    assert len({c["pid"] for c in launches[2:]}) == 2 and launches[0]["pid"] not in {
        c["pid"] for c in launches[2:]
    }
    assert not [c for c in calls[3:] if c["what"] == "apply"], "the replay runs FUNC only"
    assert {c["no_cache"] for c in calls} == {"1"}, "CuTe DSL's cache is off in the record run too"
    args, kwargs = saved_inputs(work / "cap", 2)
    assert args[0].tolist() == [10.0 + i for i in range(8)]
    assert args[1].tolist() == [0.0] * 8, "saved before FUNC wrote into it"
    assert kwargs == {"scale": 3.0, "note": {"step": 1}}
    assert sorted(p.name for p in (work / "cap" / "extract").iterdir()) == [
        "call-2",
        "calls.json",
        "replay.json",
    ]
    assert "a replay of call 2 of kernels:launch" in result.stderr


def test_a_method_and_a_function_imported_under_two_names(work, double, monkeypatch):
    monkeypatch.syspath_prepend(str(work))  # the saved Scaler unpickles from kernels
    method = extract(double, work, "model.py", "--extract", "kernels:Scaler.apply", "--calls", "3", "-o", "m")
    assert method.code == 0, method
    (self_, a), _ = saved_inputs(work / "m", 3)
    assert self_.k == 3 and a[0] == 20.0
    both = extract(double, work, "model.py", "--extract", "kernels.py:launch", "--calls", "1-2", "-o", "two")
    assert both.code == 0, both
    record = manifest.read(work / "two")
    assert record["extract"]["calls"] == [1, 2]  # call 1 through the alias, call 2 through kernels.launch
    assert [c["call"] for c in record["extract"]["replay"]["calls"]] == [1, 2]
    assert saved_inputs(work / "two", 1)[1] == {}
    assert saved_inputs(work / "two", 2)[1]["scale"] == 3.0


def test_last_and_no_stop_after_run_the_workload_to_its_end(work, double):
    last = launch(double, work, "--calls", "last", "-o", "last")
    assert last.code == 0, last
    assert "model: end" in last.stdout
    assert manifest.read(work / "last")["extract"]["calls"] == [3]
    assert sorted(p.name for p in (work / "last" / "extract").glob("call-*")) == ["call-last"]
    on = launch(double, work, "--no-stop-after", "-o", "on")
    assert on.code == 0, on
    assert "model: end" in on.stdout
    assert manifest.read(work / "on")["extract"]["calls"] == [1]


def test_replay_captures_again_from_the_saved_calls(work, double):
    first = launch(double, work, "--calls", "2", "-o", "cap")
    assert first.code == 0, first
    (work / "calls.log").unlink()
    before = snapshot(work / "cap")
    again = extract(double, work, "--replay", "cap", "-o", "again", "--json")
    assert again.code == 0, again
    record = json.loads(again.stdout)
    assert record["extract"]["replay_of"] == str(work / "cap") and record["extract"]["record"] is None
    # no record run, and the tracker pass of the capture it replays: one pass
    assert record["tracker"]["mode"] == "reused" and "reusing the tracker pass" in again.stderr
    assert [c["first"] for c in logged(work)] == [10.0]
    assert (work / "again" / "extract" / "call-2" / "inputs.pkl").is_file()
    assert snapshot(work / "cap") == before
    (work / "calls.log").unlink()
    twice = launch(double, work, "--calls", "2", "-o", "twice")
    assert twice.code == 0 and manifest.read(work / "twice")["tracker"]["mode"] == "reused", twice
    assert len(logged(work)) == 3 + 1  # the record run (launch, apply, launch: stopped), one pass
    (work / "kernels.py").write_text(KERNELS + "\n# edited\n")
    edited = extract(double, work, "--replay", "cap", "-o", "edited", "--json")
    assert edited.code == 0 and json.loads(edited.stdout)["tracker"]["mode"] == "fresh", edited
    same = extract(double, work, "--replay", "cap", "-o", "cap", "--clobber")
    assert same.code == 2 and "would replace the one it replays" in same.stderr, same
    default = extract(double, work, "--replay", "cap")
    assert default.code == 0 and manifest.read(work / "cap-replay")["extract"]["replay_of"], default
    with_calls = extract(double, work, "--replay", "cap", "--calls", "3", "-o", "x")
    assert with_calls.code == 2 and "--calls does not go with --replay" in with_calls.stderr, with_calls
    with_target = extract(double, work, "model.py", "--replay", "cap", "-o", "x")
    assert with_target.code == 2 and "give no target" in with_target.stderr, with_target
    plain = extract(double, work, "model.py", "-o", "plain", env={"STEPS": "1"})
    assert plain.code == 0, plain
    not_saved = extract(double, work, "--replay", "plain", "-o", "y")
    assert not_saved.code == 2 and "holds no saved calls" in not_saved.stderr, not_saved


def test_shown_by_show_and_the_report(work, double):
    result = launch(double, work, "-o", "cap")
    assert result.code == 0, result
    shown = run_iket("show", "cap", cwd=work)
    assert shown.code == 0 and "this capture is a replay of call 1 of kernels:launch" in shown.stderr, shown
    html = next((work / "cap").glob("iket_pid_*.html")).read_text()
    assert "a replay of call 1 of kernels:launch" in html


def test_a_job_of_iket_toml_takes_extract(work, double):
    (work / "iket.toml").write_text(
        f'output = "runs"\nrun_iket = "{double}"\n'
        '[[jobs]]\nname = "k"\ntarget = "model.py"\n'
        'extract = "kernels:launch"\ncalls = 2\nmax_extract = "1M"\n'
    )
    result = run_iket("run", cwd=work, env=replay("affine"))
    assert result.code == 0, result
    record = manifest.read(work / "runs" / "k")
    assert record["extract"]["calls"] == [2]


def test_the_rank_that_records(work, double):
    (work / "ranks.py").write_text(
        "import os, subprocess, sys\n"
        "ranks = [{**os.environ, 'RANK': str(r)} for r in (0, 1)]\n"
        "procs = [subprocess.Popen([sys.executable, 'model.py'], env=env) for env in ranks]\n"
        "sys.exit(max(p.wait() for p in procs))\n"
    )
    result = extract(
        double, work, "ranks.py", "--extract", "kernels:launch", "--extract-rank", "1", "-o", "r"
    )
    assert result.code == 0, result
    record = manifest.read(work / "r")
    assert record["extract"]["record"]["rank"] == 1


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("kernels:nope", "kernels.py defines no function nope"),
        ("kernels:NOT_A_FUNCTION", "is not callable"),
        ("kernels:Nope.apply", "no class Nope"),
        ("missing_module:f", "module missing_module not found"),
        ("model.py:x", "defines no function x"),
        ("kernels", "is not MODULE:FUNC"),
    ],
)
def test_a_function_that_is_not_there_is_refused_before_anything_runs(work, double, spec, said):
    result = extract(double, work, "model.py", "--extract", spec, "-o", "cap")
    assert result.code == 2 and said in result.stderr, result
    assert not (work / "calls.log").exists() and not (work / "cap").exists()
    assert "Traceback" not in result.stderr


def test_options_that_need_extract_and_bad_values(work, double):
    for args, said in [
        (["--calls", "2"], "--calls needs --extract"),
        (["--no-stop-after"], "--no-stop-after needs --extract"),
        (["--extract", "kernels:launch", "--calls", "2-1"], "is not N, A-B or last"),
        (["--extract", "kernels:launch", "--max-extract", "lots"], "--max-extract 'lots' is not a size"),
        (["--extract", "model:main_loop"], "defines no function main_loop"),
    ]:
        result = extract(double, work, "model.py", *args, "-o", "cap")
        assert result.code == 2 and said in result.stderr, result


def test_a_function_in_the_script_itself_is_refused(work, double):
    (work / "selfish.py").write_text("def step():\n    pass\nif __name__ == '__main__':\n    step()\n")
    result = extract(double, work, "selfish.py", "--extract", "selfish:step", "-o", "cap")
    assert result.code == 2 and "defined in the script itself" in result.stderr, result


def test_never_called_says_how_many_calls_were_seen(work, double):
    result = launch(double, work, "--calls", "7", "-o", "cap")
    assert result.code == 1, result
    assert "kernels:launch was called 3 times in the record run; --calls 7 needs 7" in result.stderr
    assert not (work / "cap").exists() and (work / "cap.failed" / "iket.log").is_file()
    assert len(logged(work)) == 6  # the record run only: no pass ran


def test_an_argument_that_cannot_be_saved_is_named(work, double):
    result = launch(
        double,
        work,
        "--calls",
        "2",
        "-o",
        "cap",
        env={"UNPICKLABLE": "1"},
    )
    assert result.code == 2, result
    assert "argument note cannot be saved" in result.stderr and "Traceback" not in result.stderr
    assert not list((work / "cap.failed" / "extract").glob("call-*"))


def test_over_max_extract_stops_and_removes(work, double):
    result = launch(double, work, "--max-extract", "100", "-o", "cap")
    assert result.code == 1, result
    assert "over --max-extract" in result.stderr and "raise --max-extract" in result.stderr
    assert not list((work / "cap.failed" / "extract").glob("call-*"))


def test_a_failing_record_run_keeps_its_output(work, double):
    result = launch(
        double,
        work,
        "--calls",
        "last",
        "-o",
        "cap",
        env={"FAIL": "3"},
    )
    assert result.code == 1, result
    assert "the record run failed with status 3" in result.stderr
    assert "model: end" in (work / "cap.failed" / "iket.log").read_text()


def test_timeout_covers_the_record_run(work, double):
    (work / "cap").mkdir()
    result = launch(
        double,
        work,
        "--calls",
        "last",
        "--timeout",
        "2",
        "-o",
        "cap",
        "--clobber",
        env={"SLOW": "30"},
    )
    assert result.code == 124 and "the record run: timed out" in result.stderr, result
    assert (work / "cap").is_dir() and not any((work / "cap").iterdir())


def test_ctrl_c_in_the_record_run_stops_its_tree(work, double):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_INJECTION64_PATH"}
    env.update(replay("affine"), SLOW="30")
    args = ("profile", "--run-iket", double, "model.py", "--extract", "kernels:launch", "--calls", "last")
    cli = start_iket(*args, "-o", "cap", cwd=work, env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while not logged(work) and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = logged(work)[0]["pid"]
    os.killpg(cli.pid, signal.SIGINT)
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == 130 and "interrupted by SIGINT" in err, err
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_the_python_api_takes_extract_and_replay(work, double, monkeypatch):
    import iket_cli

    monkeypatch.chdir(work)
    monkeypatch.setenv("IKET_DOUBLE_CAPTURE", replay("affine")["IKET_DOUBLE_CAPTURE"])
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    first = iket_cli.profile("model.py", "api", extract="kernels:launch", calls=2, run_iket=str(double))
    assert first.manifest["extract"]["calls"] == [2]
    again = iket_cli.profile(None, "api2", replay="api", run_iket=str(double))
    assert again.manifest["extract"]["replay_of"] == str(work / "api")
    with pytest.raises(iket_cli.IketError) as refused:
        iket_cli.profile("model.py", "api3", extract="kernels:nope", run_iket=str(double))
    assert refused.value.exit_code == 2


def test_a_reused_tracker_pass_that_does_not_fit_the_replay_is_thrown_away(work, double):
    """The tracker pass --extract reuses is chosen after the record run; when it does not fit
    (the double replays another H200 capture: other kernels), the capture is made again with
    both passes, and the entry that did not fit is the one discarded."""
    first = launch(double, work, "-o", "one")
    assert first.code == 0, first
    other = {"IKET_DOUBLE_CAPTURE": str(Path(replay("affine")["IKET_DOUBLE_CAPTURE"]).parent / "multi")}
    again = launch(double, work, "-o", "two", env=other)
    assert again.code == 0, again
    assert "the cached tracker pass does not fit this capture" in again.stderr
    record = manifest.read(work / "two")
    assert record["tracker"]["mode"] == "fresh" and record["tracker"]["rerun"]
    assert record["tracker"]["key"] == manifest.read(work / "one")["tracker"]["key"]
    assert record["extract"]["replay"]["calls"][0]["equal"]
