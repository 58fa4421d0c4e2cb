"""``iket profile`` end to end, through the console entry point in a subprocess.

The real run-iket runs every path before a kernel launch; the test double (real run-iket
with the GPU's raw output replayed) runs the capture success path.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iket_cli.analysis import overhead
from iket_cli.model import manifest
from iket_cli.render import report

from conftest import FIXTURES, manifest_text, replay, run_iket, snapshot, start_iket

AFFINE = FIXTURES / "affine"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A working directory with a workload that records each pass's injection variables."""
    (tmp_path / "w.py").write_text(
        "import json, os, sys\n"
        "KEYS = ('CUDA_INJECTION64_PATH', 'IKET_INJECTION_CONFIG', 'TVM_TIRX_IKET_INJECTED_CHILD_ENABLE')\n"
        "def workload():\n"
        "    with open(os.environ['PASSES'], 'a') as f:\n"
        "        f.write(json.dumps({k: os.environ.get(k) for k in KEYS} | {'argv': sys.argv[1:]}) + '\\n')\n"
        "    print('workload ran')\n"
        "if __name__ == '__main__':\n"
        "    print('main block ran')\n"
        "    workload()\n"
    )
    return tmp_path


def profile(double, *args, cwd: Path, env: dict | None = None):
    """``iket profile`` with the replay double as its run-iket."""
    return run_iket("profile", "--run-iket", double, *args, cwd=cwd, env=env)


def passes(work: Path) -> list[dict]:
    return [json.loads(line) for line in (work / "passes.jsonl").read_text().splitlines()]


def env_for(work: Path, capture: str = "affine") -> dict:
    return {**replay(capture), "PASSES": str(work / "passes.jsonl")}


def previous_capture(folder: Path) -> dict:
    """Make a real previous capture in ``folder`` and return its byte snapshot."""
    folder.mkdir()
    for name in os.listdir(AFFINE):
        if name.startswith("iket_pid_"):
            (folder / name).write_bytes((AFFINE / name).read_bytes())
    (folder / "manifest.json").write_text(manifest_text())
    return snapshot(folder)


# -- success path (test double) ------------------------------------------------------


@pytest.mark.parametrize(
    "form",
    [["w.py:workload"], ["w.py", "a1"], ["-m", "w", "a1"], ["--", sys.executable, "w.py", "a1"]],
    ids=["function", "script", "module", "command"],
)
def test_every_target_form_captures(work, double, form):
    result = profile(double, "-o", "cap", *form, cwd=work, env=env_for(work))
    assert result.code == 0, result
    record = manifest.read(work / "cap")
    assert record["status"] == "ok" and record["error"] is None
    runs = passes(work)
    assert len(runs) == 2, "run-iket runs the workload twice"
    assert runs[0]["IKET_INJECTION_CONFIG"].endswith("tracker/tracker.config.json")
    assert runs[1]["IKET_INJECTION_CONFIG"].endswith("iket/iket.config.json")
    assert all(r["CUDA_INJECTION64_PATH"] and r["TVM_TIRX_IKET_INJECTED_CHILD_ENABLE"] == "1" for r in runs)
    if form[0] != "w.py:workload":
        assert all(r["argv"] == ["a1"] for r in runs)
    assert ("main block ran" in result.stdout) == (form[0] != "w.py:workload")
    (process,) = record["processes"]
    for kind in ("trace_json", "perfetto"):
        produced = work / "cap" / process["artifacts"][kind]["path"]
        assert produced.read_bytes() == (AFFINE / produced.name).read_bytes(), kind
    report = (work / "cap" / process["artifacts"]["html"]["path"]).read_text()
    assert "ui.perfetto.dev" in report and '"kernel":"profiled_affine_kernel"' in report, "the offline report"
    gz = process["artifacts"]["pftrace_gz"]["path"]
    assert gzip.decompress((work / "cap" / gz).read_bytes()) == gzip.decompress((AFFINE / gz).read_bytes())
    assert process["kernels"] == [
        {"name": "profiled_affine_kernel", "short": "profiled_affine_kernel", "launches": 1}
    ]
    assert (process["launches"], process["ranges"], process["markers"]) == (1, 1, 1)
    assert record["postprocess"] == ["perfetto", "json", "html"]
    assert set(record["phases"]) == {"tracker", "config", "capture", "postprocess", "run_iket", "overhead"}
    assert record["phases"]["overhead"] is None and record["overhead"] is None
    assert all(isinstance(v, float) for k, v in record["phases"].items() if k != "overhead")
    assert record["versions"]["run_iket"] == "4.8.1"
    assert sorted(p.name for p in (work / "cap").iterdir() if p.is_dir()) == [], "no intermediates"
    assert "workload ran" in (work / "cap" / "iket.log").read_text()
    left = sorted(p.name for p in work.iterdir() if p.name != "__pycache__")  # Python's, where it writes one
    assert left == ["cap", "passes.jsonl", "w.py"], "no staging or lock left behind"


def test_two_processes_two_traces(work, double):
    result = profile(double, "w.py:workload", "--json", cwd=work, env=env_for(work, "spawn"))
    assert result.code == 0, result
    printed = json.loads(result.stdout)
    assert [p["pid_hex"] for p in printed["processes"]] == ["0x299", "0x2b5"]
    assert printed == manifest.read(work / "iket-w")
    assert "workload ran" not in result.stdout, "with --json the workload's output goes to stderr"


def test_keep_and_single_format(work, double):
    result = profile(
        double,
        "--keep",
        "--postprocess",
        "json",
        "w.py:workload",
        "-o",
        "cap",
        cwd=work,
        env=env_for(work, "multi"),
    )
    assert result.code == 0, result
    for name in ("tracker", "gen-config", "iket"):
        assert (work / "cap" / name).is_dir()
    (process,) = manifest.read(work / "cap")["processes"]
    assert set(process["artifacts"]) == {"trace_json"}
    assert process["raw"] == "iket/pid_0x23f/iket.data.json"
    assert process["kernels"] == [
        {"name": "scale_loop_kernel", "short": "scale_loop_kernel", "launches": 3},
        {"name": "copy_kernel_kernel", "short": "copy_kernel_kernel", "launches": 1},
    ]


def test_clobber_replaces_only_after_success(work, double):
    before = previous_capture(work / "cap")
    refused = profile(double, "-o", "cap", "w.py:workload", cwd=work, env=env_for(work))
    assert refused.code == 2, refused
    assert "--clobber" in refused.stderr and "--output-dir" in refused.stderr
    assert snapshot(work / "cap") == before
    assert not (work / "passes.jsonl").exists(), "refused before anything ran"
    done = profile(
        double,
        "-o",
        "cap",
        "--clobber",
        "w.py:workload",
        cwd=work,
        env=env_for(work),
    )
    assert done.code == 0, done
    assert manifest.read(work / "cap")["status"] == "ok"


def test_capture_without_trace_fails_and_keeps_previous(work, double):
    """The capture pass succeeds but the injection wrote nothing: no artifact, exit 1."""
    before = previous_capture(work / "cap")
    (work / "cap.failed").mkdir()
    (work / "cap.failed" / "manifest.json").write_text(manifest_text(status="failed"))
    env = {"PASSES": str(work / "passes.jsonl"), "IKET_DOUBLE_CAPTURE": str(work / "empty")}
    (work / "empty" / "tracker").mkdir(parents=True)
    for pid in (AFFINE / "tracker").glob("pid_*"):
        shutil.copytree(pid, work / "empty" / "tracker" / pid.name)
    result = profile(double, "-o", "cap", "--clobber", "w.py:workload", cwd=work, env=env)
    assert result.code == 1, result
    assert "produced no trace" in result.stderr
    assert snapshot(work / "cap") == before
    failed = manifest.read(work / "cap.failed")
    assert failed["status"] == "failed" and failed["error"]["phase"] == "postprocess"


# -- paths before a kernel launch (real run-iket) ------------------------------------------


def test_tracker_failure_keeps_previous_capture(tmp_path, real_run_iket):
    before = previous_capture(tmp_path / "cap")
    (tmp_path / "fail.py").write_text("import sys\nprint('about to fail', flush=True)\nsys.exit(3)\n")
    result = run_iket(
        "profile", "--run-iket", real_run_iket, "fail.py", "-o", "cap", "--clobber", "--json", cwd=tmp_path
    )
    assert result.code == 1, result
    assert "iket: error: the workload exited with status 3 in the tracker pass" in result.stderr
    assert "about to fail" in result.stderr, "the last lines of the pass are shown"
    assert "Traceback" not in result.stderr
    assert snapshot(tmp_path / "cap") == before
    failed = tmp_path / "cap.failed"
    assert str(failed) in result.stderr
    record = manifest.read(failed)
    assert record["status"] == "failed" and record["error"]["phase"] == "tracker"
    assert json.loads(result.stdout) == record, "--json prints the failure's manifest too"
    assert "Tracker failed with return code: 3" in (failed / "iket.log").read_text()
    assert (failed / "tracker" / "tracker.config.json").is_file(), "run-iket's intermediates kept"


def libs_base_alone(folder: Path, real_run_iket: Path) -> Path:
    """A run-iket whose Python sees the packages installed here as libs-base alone leaves them:
    a venv that reaches this site-packages through a ``.pth`` line, so that the ``.pth`` files
    in it (nvidia-cutlass-dsl's, which puts ``iket`` on the path) are not run."""
    import site
    import venv

    venv.create(folder, with_pip=False)
    python = folder / "bin" / "python"
    inner = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True
    )
    Path(inner.stdout.strip(), "here.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    launcher = folder / "bin" / "run-iket"
    body = real_run_iket.read_text().split("\n", 1)[1]
    launcher.write_text(f"#!{python}\n{body}")
    launcher.chmod(0o755)
    return launcher


def test_libs_base_alone_still_runs(tmp_path, real_run_iket):
    """run-iket on its own dies on 'import iket'; through iket it reaches the tracker pass."""
    bare_run_iket = libs_base_alone(tmp_path / "bare", real_run_iket)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bare = subprocess.run([str(bare_run_iket), "--help"], capture_output=True, text=True, env=env)
    assert bare.returncode != 0 and "No module named 'iket'" in bare.stderr, bare.stderr
    (tmp_path / "plain.py").write_text("print('reached the tracker pass')\n")
    result = run_iket("profile", "--run-iket", bare_run_iket, "plain.py", cwd=tmp_path)
    assert "reached the tracker pass" in result.stdout + result.stderr, result


def test_non_utf8_output_does_not_break(tmp_path, real_run_iket):
    (tmp_path / "noisy.py").write_text("import os\nos.write(1, b'bytes \\xff\\xfe here\\n')\n")
    result = run_iket("profile", "--run-iket", real_run_iket, "noisy.py", cwd=tmp_path)
    assert result.code == 1, result  # no instrumented kernel: the expected ending on a CPU
    assert "UnicodeDecodeError" not in result.stdout + result.stderr
    assert "bytes \ufffd\ufffd here" in (tmp_path / "iket-noisy.failed" / "iket.log").read_text()


# -- timeouts, interrupts, locks (real run-iket; the workload sleeps in the tracker pass) -----

SLEEPER = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],"
    " start_new_session=True)\n"
    "open('pids', 'w').write(f'{os.getpid()} {child.pid}')\n"
    "time.sleep(120)\n"
)


def wait_for(path: Path, seconds: float = 30) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_second_concurrent_capture_fails_at_once(tmp_path, real_run_iket):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    first = start_iket(
        "profile",
        "--run-iket",
        real_run_iket,
        "-o",
        "cap",
        "--timeout",
        "60",
        "sleeper.py",
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(tmp_path / "pids")
        start = time.monotonic()
        second = run_iket("profile", "--run-iket", real_run_iket, "-o", "cap", "sleeper.py", cwd=tmp_path)
        assert second.code == 2, second
        assert time.monotonic() - start < 10
        assert f"another iket command is using {tmp_path / 'cap'} (pid {first.pid})" in second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=30)


def test_console_script_and_module_agree(tmp_path):
    script = Path(sys.executable).parent / "iket"
    assert script.exists(), "the install provides the iket console script"
    via_script = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    via_module = run_iket("--version", cwd=tmp_path)
    assert via_script.returncode == via_module.code == 0
    assert via_script.stdout == via_module.stdout
    assert via_module.stdout.startswith("iket-cli ") and "run-iket 4.8" in via_module.stdout


def test_workload_output_passes_through_live(tmp_path, real_run_iket):
    """run-iket holds a pass's output back until the pass ends; iket shows it as it comes."""
    (tmp_path / "chatty.py").write_text(
        "import os, time\n"
        "print('first line', flush=True)\n"
        "for _ in range(400):\n"
        "    if os.path.exists('go'):\n"
        "        break\n"
        "    time.sleep(0.05)\n"
        "print('after go' if os.path.exists('go') else 'gave up', flush=True)\n"
    )
    proc = start_iket("profile", "--run-iket", real_run_iket, "chatty.py", cwd=tmp_path)
    first = proc.stdout.readline()
    (tmp_path / "go").write_text("")
    out, err = proc.communicate(timeout=60)
    assert first == "first line\n", err
    assert "after go" in out, "the first line arrived while the pass was still running"
    assert proc.returncode == 1  # no instrumented kernel on a CPU
    log = (tmp_path / "iket-chatty.failed" / "iket.log").read_text()
    assert log.index("Dry run application first") < log.index("first line") < log.index("after go")


def test_iket_decodes_the_raw_captures_itself(work, double):
    result = profile(
        double,
        "-o",
        "cap",
        "-v",
        "w.py:workload",
        cwd=work,
        env=env_for(work, "multi"),
    )
    assert result.code == 0, result
    record = manifest.read(work / "cap")
    argv = record["run_iket_argv"]
    assert argv[argv.index("--postprocess") + 1] == "none", "run-iket only runs the passes"
    assert record["phases"]["postprocess"] > 0
    log = (work / "cap" / "iket.log").read_text()
    assert "[iket] decoded pid 0x23f json" in log and "[iket] decoded pid 0x23f perfetto" in log
    assert "[iket] decoded pid 0x23f json" in result.stderr, "-v shows the decode lines"
    trace = work / "cap" / "iket_pid_0x23f.trace.json"
    assert trace.read_bytes() == (FIXTURES / "multi" / trace.name).read_bytes()


def test_decode_failure_keeps_previous_capture(work, double, tmp_path):
    before = previous_capture(work / "cap")
    broken = tmp_path / "broken"
    shutil.copytree(FIXTURES / "affine", broken)
    data = broken / "iket" / "pid_0x204" / "iket.data.bin"
    data.write_bytes(data.read_bytes()[:8])
    env = {"PASSES": str(work / "passes.jsonl"), "IKET_DOUBLE_CAPTURE": str(broken)}
    result = profile(double, "-o", "cap", "--clobber", "w.py:workload", cwd=work, env=env)
    assert result.code == 1, result
    assert "decodes failed: " in result.stderr and "iket.data.bin is truncated" in result.stderr
    assert snapshot(work / "cap") == before
    failed = manifest.read(work / "cap.failed")
    assert failed["error"]["phase"] == "postprocess"
    assert (work / "cap.failed" / "iket" / "pid_0x204" / "iket.data.json").is_file(), "raw data kept"


def test_env_cwd_and_python_reach_both_passes(work, double, tmp_path):
    inner = work / "inner"
    inner.mkdir()
    (inner / "where.py").write_text(
        "import os, sys\n"
        "def workload():\n"
        "    with open(os.environ['PASSES'], 'a') as f:\n"
        "        f.write(f\"{os.getcwd()}|{os.environ.get('MY_KEY')}|{os.environ.get('VIA_WRAPPER')}\\n\")\n"
    )
    wrapper = tmp_path / "bin" / "mypython"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nVIA_WRAPPER=yes exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    result = profile(
        double,
        "--env",
        "MY_KEY=a=b",
        "--cwd",
        inner,
        "--python",
        wrapper,
        "-o",
        "cap",
        "where.py:workload",
        cwd=work,
        env=env_for(work),
    )
    assert result.code == 0, result
    lines = (work / "passes.jsonl").read_text().splitlines()
    assert lines == [f"{inner}|a=b|yes"] * 2
    record = manifest.read(work / "cap")
    assert record["cwd"] == str(inner) and record["argv"][0] == str(wrapper)


# A workload's child that "launches a kernel": it names itself to the double, which then
# replays one recorded process per such child (see tests/fakes/run_iket_double.py).
LAUNCHER_CHILD = (
    "import os, subprocess, sys\n"
    "CHILD = \"import os; open(os.path.join(os.environ['LAUNCHED'], str(os.getpid())), 'w').close()\"\n"
)


def capture_children(work: Path, double, tmp_path: Path, target: str) -> list[dict]:
    """Capture ``target`` (whose children launch) replaying the two-process spawn capture."""
    launched = tmp_path / "launched"
    launched.mkdir()
    env = {**replay("spawn"), "IKET_DOUBLE_LAUNCHED": str(launched), "LAUNCHED": str(launched)}
    result = profile(double, "-o", "cap", target, cwd=work, env=env)
    assert result.code == 0, result
    return manifest.read(work / "cap")["processes"]


def test_processes_are_labelled_by_rank(work, double, tmp_path):
    """Two 'ranks' launched like torchrun would: the hook labels each captured process."""
    (work / "ranks.py").write_text(
        LAUNCHER_CHILD + "def rank_env(r):\n"
        "    return {**os.environ, 'RANK': str(r), 'LOCAL_RANK': str(r), 'WORLD_SIZE': '2',\n"
        "            'CUDA_VISIBLE_DEVICES': str(r)}\n"
        "def workload():\n"
        "    procs = [subprocess.Popen([sys.executable, '-c', CHILD], env=rank_env(r)) for r in (1, 0)]\n"
        "    for p in procs:\n"
        "        p.wait()\n"
    )
    processes = capture_children(work, double, tmp_path, "ranks.py:workload")
    assert len(processes) == 2
    by_rank = {p["labels"]["rank"]: p for p in processes}
    assert set(by_rank) == {0, 1}
    for rank, process in by_rank.items():
        label = process["labels"]
        assert (label["local_rank"], label["world_size"]) == (rank, 2)
        assert label["cuda_visible_devices"] == str(rank)
        assert label["hostname"] and label["argv"][1] == "-c"
        assert label["parent_argv"][-2:] == [str(work / "ranks.py"), "workload"], "the shim, calling it"
    shown = run_iket("show", work / "cap", "--format", "csv", cwd=work)
    assert {line.split(",")[0] for line in shown.stdout.splitlines()[1:]} == {
        f"rank {r} (pid {p['pid_hex']})" for r, p in by_rank.items()
    }


def test_children_of_a_spawner_are_labelled_by_their_parent(work, double, tmp_path):
    (work / "spawner.py").write_text(
        LAUNCHER_CHILD + "for _ in range(2):\n    subprocess.run([sys.executable, '-c', CHILD], check=True)\n"
    )
    processes = capture_children(work, double, tmp_path, "spawner.py")
    parents = {p["labels"]["ppid"] for p in processes}
    assert len(processes) == 2 and len(parents) == 1, "two children of one spawner"
    assert all(p["labels"]["parent_argv"][-1].endswith("spawner.py") for p in processes)
    shown = run_iket("show", work / "cap", "--format", "csv", cwd=work)
    assert {line.split(",")[0] for line in shown.stdout.splitlines()[1:]} == {
        f"{p['pid_hex']} (child of {hex(p['labels']['ppid'])})" for p in processes
    }


def test_a_capture_pass_that_outgrows_its_buffer_is_explained(work, double):
    """On the H200, one launch more in the capture pass aborts it from inside the injection
    library with this message (see scripts/gpu_check.py); here the workload prints it."""
    (work / "grows.py").write_text(
        "import os, sys\n"
        "if os.environ['IKET_INJECTION_CONFIG'].endswith('iket/iket.config.json'):\n"
        "    print(\"terminate called after throwing an instance of 'std::runtime_error'\",\n"
        "          file=sys.stderr)\n"
        "    print('  what():  IKET trace buffer is too small. Increase the trace buffer size to at least '\n"
        "          '96 bytes (run-iket: --context-buffer-size; in-process API: ...).', file=sys.stderr)\n"
        "    sys.stderr.flush()\n"
        "    os.abort()\n"
    )
    before = previous_capture(work / "cap")
    result = profile(double, "-o", "cap", "--clobber", "grows.py", cwd=work, env=env_for(work))
    assert result.code == 1, result
    assert (
        "iket: error: the capture pass recorded more than the tracker pass: its trace buffer needed "
        "at least 96 bytes, sized from the tracker pass at 55 bytes, and the workload was aborted"
    ) in result.stderr
    assert "the same kernels the same number of times" in result.stderr
    assert "--context-buffer-size 96" in result.stderr
    assert snapshot(work / "cap") == before
    assert manifest.read(work / "cap.failed")["error"]["phase"] == "capture"


def test_pass_drift_marks_the_capture_suspect(work, double, tmp_path):
    drifting = tmp_path / "drifting"
    shutil.copytree(FIXTURES / "multi", drifting)
    tracker = drifting / "tracker" / "pid_0x222" / "tracker.json"
    data = json.loads(tracker.read_text())
    extra = next(launch for launch in data["launches"] if launch["kernelName"] == "scale_loop_kernel")
    data["launches"].append(extra)  # the tracker pass saw one more launch than the capture pass
    tracker.write_text(json.dumps(data))
    env = {"PASSES": str(work / "passes.jsonl"), "IKET_DOUBLE_CAPTURE": str(drifting)}
    result = profile(double, "-o", "cap", "w.py:workload", cwd=work, env=env)
    assert result.code == 0, result
    assert "the passes differ, the capture is suspect" in result.stderr
    record = manifest.read(work / "cap")
    assert record["status"] == "suspect"
    assert record["drift"] == ["scale_loop_kernel: 4 launch(es) in the tracker pass, 3 in the capture pass"]
    strict = profile(double, "-o", "cap2", "--strict", "w.py:workload", cwd=work, env=env)
    assert strict.code == 1, strict
    assert "tracker and capture passes differ" in strict.stderr
    assert manifest.read(work / "cap2")["status"] == "suspect", "the capture is still published"


def test_agreeing_passes_are_ok(work, double):
    result = profile(double, "-o", "cap", "w.py:workload", cwd=work, env=env_for(work, "spawn"))
    assert result.code == 0 and manifest.read(work / "cap")["drift"] == []


def test_trace_budget_stops_before_the_capture_pass(work, double):
    result = profile(
        double,
        "-o",
        "cap",
        "--max-buffer",
        "1k",
        "w.py:workload",
        cwd=work,
        env=env_for(work, "multi"),
    )
    assert result.code == 1, result
    assert "would allocate a 5.8 KiB trace buffer, over --max-buffer 1.0 KiB" in result.stderr
    assert "--enabled-cluster" in result.stderr and "--max-ts-cnt-per-warp" in result.stderr
    assert len(passes(work)) == 1, "only the tracker pass ran the workload"
    record = manifest.read(work / "cap.failed")
    assert record["trace_budget"]["device_buffer_bytes"] == 5888
    within = profile(
        double,
        "-o",
        "cap",
        "--max-buffer",
        "1M",
        "w.py:workload",
        cwd=work,
        env=env_for(work, "multi"),
    )
    assert within.code == 0, within
    budget = manifest.read(work / "cap")["trace_budget"]
    assert budget == {
        "device_buffer_bytes": 5888,
        "max_buffer_bytes": 1 << 20,
        "estimated_json_bytes_max": 5888 * 25,
    }
    bad = profile(double, "--max-buffer", "lots", "w.py:workload", cwd=work)
    assert bad.code == 2 and "is not a size" in bad.stderr


def test_a_closed_stdout_does_not_stop_the_capture(work, double):
    (work / "chatty.py").write_text("def workload():\n    for i in range(20000):\n        print('line', i)\n")
    script = f"{sys.executable} -m iket_cli profile --run-iket {double} -o cap chatty.py:workload | head -1"
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {script}"],
        cwd=work,
        capture_output=True,
        text=True,
        env={**os.environ, **replay("affine")},
        timeout=120,
    )
    assert proc.stdout == "line 0\n"
    assert manifest.read(work / "cap")["status"] == "ok"
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("postprocess", ["all", "html"])
def test_profile_lints_what_it_captured(work, double, postprocess):
    """With --postprocess html the JSON trace is made only for the report and removed after
    it: it must be linted first (it once was removed before lint ran, and lint was empty)."""
    args = ("-o", "cap", "--postprocess", postprocess, "w.py:workload")
    result = profile(double, *args, cwd=work, env=env_for(work, "multi"))
    assert result.code == 0, result
    assert "[resolution] 142 of 192 ranges in scale_loop_kernel" in result.stderr
    (finding,) = manifest.read(work / "cap")["lint"]
    assert (finding["process"], finding["code"]) == ("0x23f", "resolution")
    page = report.embedded(work / "cap" / "iket_pid_0x23f.html")
    assert [f["code"] for f in page["stats"][0]["findings"]] == ["resolution"], "the report shows the same"
    assert (work / "cap" / "iket_pid_0x23f.trace.json").exists() == (postprocess == "all")


def test_overhead_runs_a_warp_trace_pass_and_compares(work, double):
    env = {**env_for(work, "multi"), "IKET_DOUBLE_WARP_CAPTURE": str(FIXTURES / "warp_multi")}
    result = profile(double, "-o", "cap", "--overhead", "w.py:workload", cwd=work, env=env)
    assert result.code == 0, result
    runs = passes(work)
    assert len(runs) == 3, "tracker pass, capture pass, then the --warp-trace run"
    record = manifest.read(work / "cap")
    assert "--warp-trace" in result.stderr or "--warp-trace" in (work / "cap" / "iket.log").read_text()
    found = record["overhead"]
    assert found["error"] is None and found["run_iket_s"] > 0
    assert record["phases"]["overhead"] == found["run_iket_s"]
    kernels = {row["kernel"]: row for row in found["kernels"]}
    assert set(kernels) == {"scale_loop_kernel", "copy_kernel_kernel"}
    expected = {r["kernel"]: r for r in overhead.measure(FIXTURES / "multi", FIXTURES / "warp_multi")}
    assert kernels == expected
    assert "iket: overhead: scale_loop_kernel:" in result.stderr
    assert not (work / "cap" / "overhead").exists(), "the warp-trace run is kept only with --keep"
    assert manifest.validate(record) == []


def test_overhead_that_finds_nothing_warns_but_keeps_the_capture(work, double):
    (work / "nothing").mkdir()  # the warp-trace run records no process
    env = {**env_for(work), "IKET_DOUBLE_WARP_CAPTURE": str(work / "nothing")}
    result = profile(double, "-o", "cap", "--overhead", "--keep", "w.py:workload", cwd=work, env=env)
    assert result.code == 0, result
    found = manifest.read(work / "cap")["overhead"]
    assert found["error"] == "the --warp-trace run recorded none of the instrumented kernels"
    assert "iket: warning: --overhead: the --warp-trace run recorded none" in result.stderr
    assert (work / "cap" / "overhead").is_dir(), "kept with --keep"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--warp-trace"], "--overhead compares against a --warp-trace run; drop --warp-trace"),
        (["--postprocess", "perfetto"], "--overhead reads the JSON traces"),
    ],
)
def test_overhead_refuses_what_it_cannot_compare(work, double, extra, message):
    result = profile(double, "-o", "cap", "--overhead", *extra, "w.py:workload", cwd=work, env=env_for(work))
    assert result.code == 2 and message in result.stderr
    assert not (work / "passes.jsonl").exists(), "refused before anything ran"


def test_a_cuda_process_without_instrumented_kernels_is_set_aside(work, double, tmp_path):
    """Under torchrun the agent initialises CUDA and gets an empty capture of its own (seen
    on the H200): it stays in the manifest with 0 launches but is not what to open or show."""
    replayed = tmp_path / "replayed"
    shutil.copytree(AFFINE, replayed)
    idle = replayed / "iket" / "pid_0x100"
    idle.mkdir()
    raw = json.loads((replayed / "iket" / "pid_0x204" / "iket.data.json").read_text())
    (idle / "iket.data.json").write_text(json.dumps({**raw, "launches": []}))
    (idle / "iket.data.bin").write_bytes(b"")
    env = {"PASSES": str(work / "passes.jsonl"), "IKET_DOUBLE_CAPTURE": str(replayed)}
    result = profile(double, "-o", "cap", "w.py:workload", cwd=work, env=env)
    assert result.code == 0, result
    record = manifest.read(work / "cap")
    assert [(p["pid_hex"], p["launches"]) for p in record["processes"]] == [("0x100", 0), ("0x204", 1)]
    assert "captured 1 process(es)" in result.stderr
    assert "1 more CUDA process(es) launched no instrumented kernel: 0x100" in result.stderr
    assert "open " + str(work / "cap" / "iket_pid_0x204.html") + " in a browser" in result.stderr
    shown = run_iket("show", work / "cap", "--format", "csv", cwd=work)
    assert {line.split(",")[0] for line in shown.stdout.splitlines()[1:]} == {"0x204"}
    from iket_cli import Capture

    assert Capture.load(work / "cap").trace_json.name == "iket_pid_0x204.trace.json"


@pytest.mark.parametrize(
    ("args", "env", "seen", "record"),
    [
        ([], {}, ["1", "1"], {"CUTE_DSL_NO_CACHE": "1", "set_by": "iket"}),
        ([], {"CUTE_DSL_NO_CACHE": "0"}, ["0", "0"], {"CUTE_DSL_NO_CACHE": "0", "set_by": "user"}),
        (["--keep-dsl-cache"], {}, [None, None], {"CUTE_DSL_NO_CACHE": None, "set_by": None}),
    ],
    ids=["iket turns it off", "the user's setting wins", "--keep-dsl-cache"],
)
def test_cute_dsl_compile_cache_is_off_in_both_passes(work, double, args, env, seen, record):
    """A CuTe DSL kernel loaded from its compile cache carries no IKET events: iket turns the
    cache off in both passes unless the user set the variable or asked to keep it."""
    (work / "cache.py").write_text(
        "import json, os\n"
        "with open(os.environ['PASSES'], 'a') as f:\n"
        "    f.write(json.dumps(os.environ.get('CUTE_DSL_NO_CACHE')) + '\\n')\n"
    )
    result = profile(double, "-o", "cap", *args, "cache.py", cwd=work, env={**env_for(work), **env})
    assert result.code == 0, result
    assert [json.loads(line) for line in (work / "passes.jsonl").read_text().splitlines()] == seen
    assert manifest.read(work / "cap")["dsl_cache"] == record
