"""``iket run --executor slurm`` on a real one-node Slurm cluster (.ci/run starts it with
scripts/slurm_local.sh; skipped, with the reason, where none answers).

Each job's capture pass is the run-iket test double's; everything else is real: sbatch,
squeue, scontrol, scancel, Slurm's time limit, and the CLI in a session of its own.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
from xml.etree import ElementTree as ET

import pytest
import xmlschema

from iket_cli.model.vocab import SLURM_DIR

from conftest import FIXTURES

pytestmark = pytest.mark.usefixtures("slurm_cluster")


@pytest.fixture(autouse=True)
def no_job_left_queued():
    """After each test, even a failed one: cancel what it left in Slurm's queue (iket's jobs)."""
    yield
    listed = subprocess.run(["squeue", "--noheader", "-o", "%i %j"], capture_output=True, text=True).stdout
    left = [
        line.split()[0]
        for line in listed.splitlines()
        if line.split()[1:2] and line.split()[1].startswith("iket:")
    ]
    if left:
        subprocess.run(["scancel", *left], check=False)


#: A workload that sleeps for the seconds in $NAP_FILE (else $NAP), in both passes.
NAP = (
    "import os, pathlib, time\n"
    "def workload():\n"
    "    nap = pathlib.Path(os.environ.get('NAP_FILE', '-'))\n"
    "    time.sleep(float(nap.read_text()) if nap.is_file() else float(os.environ.get('NAP', '0')))\n"
)


def job(name: str, target: str = "nap.py:workload", *, replay: str = "affine", **extra: str) -> str:
    env = {"IKET_DOUBLE_CAPTURE": str(FIXTURES / replay), **{k: v for k, v in extra.items() if k != "slurm"}}
    inline = ", ".join(f'{k} = "{v}"' for k, v in env.items())
    slurm = f"slurm = {{ {extra['slurm']} }}\n" if "slurm" in extra else ""
    return f'[[jobs]]\nname = "{name}"\ntarget = "{target}"\nenv = {{ {inline} }}\n{slurm}\n'


def configure(harness, *jobs: str, executor: str = "slurm") -> None:
    (harness.work / "nap.py").write_text(NAP)
    (harness.work / "fail.py").write_text("import sys\nprint('failing on purpose')\nsys.exit(3)\n")
    (harness.work / "iket.toml").write_text(
        f'output = "runs"\nrun_iket = "{harness.double}"\npostprocess = "json"\nexecutor = "{executor}"\n'
        "[slurm]\ngpus = 0\npoll = 1\n\n" + "".join(jobs)
    )


def manifest(harness, root: str = "runs") -> dict:
    return json.loads((harness.work / root / "run-manifest.json").read_text())


def slurm_id(started, name: str, phase: str) -> str:
    started.wait_for(f"[{name}] Slurm job", 60)
    pattern = re.compile(rf"\[{re.escape(name)}\] Slurm job (\d+): {phase}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in started.err:
            if found := pattern.search(line):
                return found.group(1)
        time.sleep(0.1)
    raise AssertionError(f"{name} never {phase}:\n{''.join(started.err)}")


def wait_for_file_text(path, text: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.is_file() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared in {path}")


def queued(ids: list[str]) -> list[str]:
    """The jobs among ``ids`` that Slurm still has pending or running."""
    out = subprocess.run(
        ["squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING", "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [i for i in ids if i in out]


def test_a_suite_with_a_failure_a_time_limit_and_an_scancel(harness):
    configure(
        harness,
        job("affine"),
        job("multi", replay="multi"),
        job("broken", "fail.py"),
        job("slow", NAP="300", slurm="time = 1"),
        job("victim", NAP="300"),
    )
    started = harness.start("run", "--junit", "junit.xml")
    victim = slurm_id(started, "victim", "running")
    wait_for_file_text(harness.work / "runs" / ".iket-slurm" / "victim.log", "[victim] iket: tracker")
    subprocess.run(["scancel", victim], check=True)
    result = started.finish(240)
    harness.check(result, 1, "2 of 5 job(s) failed, 1 cancelled", folder=harness.work / "runs")
    record = manifest(harness)
    assert record["executor"] == "slurm"
    jobs = {j["name"]: j for j in record["jobs"]}
    assert [j["name"] for j in record["jobs"]] == ["affine", "multi", "broken", "slow", "victim"]
    assert {n: j["status"] for n, j in jobs.items()} == {
        "affine": "ok",
        "multi": "ok",
        "broken": "failed",
        "slow": "timeout",
        "victim": "cancelled",
    }
    for name, entry in jobs.items():
        assert (
            entry["slurm"]["job_id"].isdigit()
            and entry["slurm"]["node"] == socket.gethostname().split(".")[0]
        )
        assert entry["slurm"]["queued_s"] is not None and entry["slurm"]["run_s"] is not None, name
    assert (
        jobs["affine"]["slurm"]["state"] == "COMPLETED"
        and jobs["affine"]["manifest"] == "affine/manifest.json"
    )
    assert (harness.work / "runs" / "multi" / "iket_pid_0x23f.trace.json").is_file()
    assert jobs["broken"]["slurm"]["state"] == "FAILED" and jobs["broken"]["slurm"]["exit_code"] == 1
    assert "status 3 in the tracker pass" in jobs["broken"]["error"]
    slow = jobs["slow"]
    assert slow["slurm"]["state"] == "TIMEOUT" and slow["exit_code"] == 124
    assert slow["error"].startswith("the Slurm time limit ended the job after")
    assert slow["manifest"] == "slow.failed/manifest.json", "iket, stopped by Slurm, kept its evidence"
    assert json.loads((harness.work / "runs" / "slow.failed" / "manifest.json").read_text())["status"] == (
        "interrupted"
    )
    assert jobs["victim"]["slurm"]["state"] == "CANCELLED" and jobs["victim"]["exit_code"] == 143
    assert jobs["victim"]["error"].startswith("cancelled outside iket (scancel)")
    assert f"[victim] Slurm job {victim}: cancelled" in result.stderr
    assert "[slow] Slurm job" in result.stderr and ": timeout" in result.stderr
    xmlschema.XMLSchema(FIXTURES / "junit.xsd").validate(harness.work / "junit.xml")
    suite = ET.parse(harness.work / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("5", "3")


def normal(text: str, root: str) -> str:
    """``text`` with the output root's and the staging folder's names, and run-iket's
    timings in the logs, made the same."""
    text = re.sub(r"iket-staging-[0-9a-f]+", "iket-staging-X", text.replace(f"/{root}/", "/ROOT/"))
    return re.sub(r"\b\d+\.\d+ s\b", "N s", text)


def test_the_run_manifest_and_junit_match_the_local_executor(harness):
    configure(harness, job("affine"), job("multi", replay="multi"), job("broken", "fail.py"))
    reports = {}
    for executor in ("local", "slurm"):
        result = harness.run(
            "run", "--executor", executor, "--output", executor, "--junit", f"{executor}.xml", timeout=180
        )
        harness.check(result, 1, "1 of 3 job(s) failed", folder=harness.work / executor)
        junit = ET.parse(harness.work / f"{executor}.xml").getroot()
        for element in junit.iter():
            element.attrib.pop("time", None)
        varying = ("duration_s", "slurm", "gpu")  # times, Slurm's view, and the GPU pinned
        jobs = [{k: v for k, v in j.items() if k not in varying} for j in manifest(harness, executor)["jobs"]]
        reports[executor] = (
            normal(json.dumps(jobs), executor),
            normal(ET.tostring(junit, "unicode"), executor),
        )
    assert "broken.failed/manifest.json" in reports["local"][0] and "<failure" in reports["local"][1]
    assert reports["slurm"] == reports["local"]
    assert manifest(harness, "local")["executor"] == "local"
    assert all(j["slurm"] is None for j in manifest(harness, "local")["jobs"])


def test_ctrl_c_cancels_the_submitted_jobs(harness):
    configure(harness, job("one", NAP="300"), job("two", NAP="300"), job("three", NAP="300"))
    started = harness.start("run")
    ids = [slurm_id(started, name, "running") for name in ("one", "two", "three")]
    for name in ("one", "two", "three"):  # iket in each job has begun its capture
        wait_for_file_text(harness.work / "runs" / ".iket-slurm" / f"{name}.log", f"[{name}] iket: tracker")
    harness.terminal_signal(started, signal.SIGINT)
    result = started.finish(120)
    harness.check(result, 130, "interrupted by SIGINT: 3 job(s) ended", folder=harness.work / "runs")
    assert "cancelling 3 Slurm job(s) (cancelled by a Ctrl-C of iket run)" in result.stderr
    assert queued(ids) == [], "no job of the run is left in Slurm's queue"
    jobs = manifest(harness)["jobs"]
    assert [(j["name"], j["status"], j["slurm"]["state"]) for j in jobs] == [
        (name, "cancelled", "CANCELLED") for name in ("one", "two", "three")
    ]
    assert all(j["manifest"] == f"{j['name']}.failed/manifest.json" for j in jobs), "evidence kept"


def test_fail_fast_cancels_the_rest_and_rerun_failed_runs_them_again(harness):
    nap = harness.work / "nap.txt"
    nap.write_text("300")
    configure(harness, job("broken", "fail.py"), job("s1", NAP_FILE=str(nap)), job("s2", NAP_FILE=str(nap)))
    result = harness.run("run", "--fail-fast", timeout=180)
    harness.check(result, 1, "1 of 3 job(s) failed, 2 cancelled", folder=harness.work / "runs")
    jobs = {j["name"]: j for j in manifest(harness)["jobs"]}
    assert jobs["s1"]["status"] == jobs["s2"]["status"] == "cancelled"
    assert jobs["s1"]["error"].startswith("--fail-fast after broken failed")
    nap.write_text("0")
    (harness.work / "fail.py").write_text("print('fixed')\n")
    again = harness.run("run", "--rerun-failed", timeout=180)
    harness.check(again, 0, folder=harness.work / "runs")
    assert [(j["name"], j["status"]) for j in manifest(harness)["jobs"]] == [
        ("broken", "ok"),
        ("s1", "ok"),
        ("s2", "ok"),
    ]
    nothing = harness.run("run", "--rerun-failed")
    harness.check(nothing, 0, folder=harness.work / "runs")
    assert "nothing to rerun" in nothing.stderr


def test_jobs_of_a_killed_run_are_cancelled_by_the_next(harness):
    nap = harness.work / "nap.txt"
    nap.write_text("300")
    configure(harness, job("s1", NAP_FILE=str(nap)))
    started = harness.start("run")
    left = slurm_id(started, "s1", "running")
    started.proc.kill()  # the CLI alone: its Slurm job runs on
    started.finish()
    assert queued([left]) == [left]
    nap.write_text("0")
    result = harness.run("run", timeout=180)
    harness.check(result, 0, folder=harness.work / "runs")
    assert "cancelled 1 Slurm job(s) left in the queue by an earlier iket run" in result.stderr
    assert queued([left]) == []
    assert manifest(harness)["jobs"][0]["status"] == "ok"


def test_a_node_failure_is_reported_with_slurms_state(harness):
    """The node goes down under a running job (as a failed node does): Slurm ends the job
    NODE_FAIL, and iket says so rather than calling it the workload's failure."""
    # --no-requeue: by default Slurm requeues a job whose node failed, and iket waits for its rerun
    configure(harness, job("victim", NAP="300", slurm='extra = ["--no-requeue"]'))
    started = harness.start("run")
    slurm_id(started, "victim", "running")
    node = socket.gethostname().split(".")[0]
    try:
        subprocess.run(
            ["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=iket-test"], check=True
        )
        result = started.finish(120)
    finally:
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
    harness.check(result, 1, "1 of 1 job(s) failed", folder=harness.work / "runs")
    (entry,) = manifest(harness)["jobs"]
    assert entry["status"] == "failed" and entry["slurm"]["state"] == "NODE_FAIL"
    assert entry["error"].startswith("the job's node failed")
    deadline = time.monotonic() + 30
    while "idle" not in subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True).stdout:
        assert time.monotonic() < deadline, "the node came back"
        time.sleep(0.5)


def test_a_requeued_job_is_awaited_and_said(harness):
    """By default Slurm requeues a job whose node failed: iket says so, waits for the rerun,
    and records how often it ran again."""
    nap = harness.work / "nap.txt"
    nap.write_text("300")
    configure(harness, job("again", NAP_FILE=str(nap)))
    started = harness.start("run")
    job_id = slurm_id(started, "again", "running")
    node = socket.gethostname().split(".")[0]
    nap.write_text("0")  # the rerun goes straight through
    try:
        subprocess.run(
            ["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=iket-test"], check=True
        )
        started.wait_for("Slurm requeued again", 60)
    finally:
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
    # Slurm holds a requeued job back for a while (BeginTime); the test need not wait for it
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], check=False)
    result = started.finish(240)
    harness.check(result, 0, folder=harness.work / "runs")
    (entry,) = manifest(harness)["jobs"]
    assert entry["status"] == "ok" and entry["slurm"]["state"] == "COMPLETED"
    assert entry["slurm"]["restarts"] >= 1


def test_jobs_n_caps_the_jobs_in_the_queue(harness):
    configure(harness, job("first"), job("second", replay="multi"))
    result = harness.run("run", "--jobs", "1", timeout=180)
    harness.check(result, 0, folder=harness.work / "runs")
    first, second = (j["slurm"] for j in manifest(harness)["jobs"])
    assert second["submitted_at"] >= first["ended_at"], "the second was submitted once the first had ended"


def test_a_refused_submission_cancels_the_jobs_submitted_before(harness):
    configure(harness, job("fine", NAP="300"), job("refused", slurm='partition = "no-such-partition"'))
    result = harness.run("run", timeout=180)
    harness.check(result, 1, "sbatch refused job iket:refused", folder=harness.work / "runs")
    assert "; the 1 job(s) submitted before were cancelled" in result.stderr
    assert "Traceback" not in result.stderr
    deadline = time.monotonic() + 30  # a cancelled job may still be completing for a moment
    while (
        "iket:fine"
        in subprocess.run(["squeue", "--noheader", "-o", "%j"], capture_output=True, text=True).stdout
    ):
        assert time.monotonic() < deadline, "nothing of the run is left queued"
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("target", "message"),
    [("nap.py:wrkload", "job typo: "), ("missing.py", "job typo: script missing.py does not exist")],
    ids=["function", "script"],
)
def test_a_target_that_does_not_exist_is_refused_before_any_submission(harness, target, message):
    """Issue 31: a typo in the last job's target was submitted and failed on the node (on a real
    cluster, hours in the queue); every target is checked before the first sbatch."""
    configure(harness, job("fine", NAP="300"), job("typo", target))
    result = harness.run("run", timeout=60)
    harness.check(result, 2, message)
    assert "nothing was submitted" in result.stderr
    listed = subprocess.run(["squeue", "--noheader", "-o", "%j"], capture_output=True, text=True).stdout
    assert "iket:" not in listed, listed
    assert not (harness.work / "runs" / SLURM_DIR).exists()
