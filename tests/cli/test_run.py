"""``iket run``: configured jobs, CI outputs, the baseline gate (replay double for the GPU pass)."""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree as ET

import pytest
import xmlschema

from conftest import FIXTURES, run_iket


def config(tmp_path, double, extra_jobs: str = "", top: str = "") -> None:
    (tmp_path / "w.py").write_text(
        "import os\n"
        "def workload():\n"
        "    open(os.environ['PINS'], 'a').write(os.environ.get('CUDA_VISIBLE_DEVICES', '-') + '\\n')\n"
    )
    (tmp_path / "fail.py").write_text("import sys\nprint('failing on purpose')\nsys.exit(3)\n")
    (tmp_path / "iket.toml").write_text(
        f'output = "runs"\nrun_iket = "{double}"\npostprocess = "all"\n{top}\n'
        f'[env]\nPINS = "{tmp_path / "pins.txt"}"\n\n'
        + replayed_job("affine")
        + replayed_job("multi")
        + extra_jobs
    )


def replayed_job(name: str) -> str:
    """A job whose capture pass replays tests/fixtures/<name>."""
    return (
        f'[[jobs]]\nname = "{name}"\ntarget = "w.py:workload"\n'
        f'env = {{ IKET_DOUBLE_CAPTURE = "{FIXTURES / name}" }}\n\n'
    )


FAILING_JOB = '\n[[jobs]]\nname = "broken"\ntarget = "fail.py"\n'


def test_jobs_reuse_their_own_tracker_passes(tmp_path, double):
    """Two jobs of the same target differ in their env: each reuses its own tracker pass."""
    config(tmp_path, double)
    assert run_iket("run", cwd=tmp_path).code == 0
    again = run_iket("run", "--output", "runs2", cwd=tmp_path)
    assert again.code == 0, again
    for job in ("affine", "multi"):
        record = json.loads((tmp_path / "runs2" / job / "manifest.json").read_text())
        assert record["tracker"]["mode"] == "reused" and record["tracker"]["rerun"] is None, job


def run_manifest(tmp_path, root="runs") -> dict:
    return json.loads((tmp_path / root / "run-manifest.json").read_text())


def test_all_jobs_with_ci_outputs(tmp_path, double):
    config(tmp_path, double, FAILING_JOB)
    step = tmp_path / "step-summary.md"
    step.write_text("earlier content\n")
    result = run_iket(
        "run",
        "--junit",
        "junit.xml",
        "--summary",
        "summary.md",
        cwd=tmp_path,
        env={"GITHUB_STEP_SUMMARY": str(step), "IKET_GPUS": ""},
    )
    assert result.code == 1, result
    assert "1 of 3 job(s) failed" in result.stderr
    jobs = {j["name"]: j for j in run_manifest(tmp_path)["jobs"]}
    assert (jobs["affine"]["status"], jobs["multi"]["status"], jobs["broken"]["status"]) == (
        "ok",
        "ok",
        "failed",
    )
    assert jobs["affine"]["manifest"] == "affine/manifest.json"
    assert jobs["broken"]["manifest"] == "broken.failed/manifest.json"
    assert "status 3 in the tracker pass" in jobs["broken"]["error"]
    assert (tmp_path / "runs" / "multi" / "iket_pid_0x23f.trace.json").is_file()
    xmlschema.XMLSchema(FIXTURES / "junit.xsd").validate(tmp_path / "junit.xml")
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("3", "1")
    failure = suite.find("testcase[@name='broken']/failure")
    assert "failing on purpose" in failure.text
    text = (tmp_path / "summary.md").read_text()
    assert "| broken | failed |" in text and "scale_loop_kernel" in text
    assert step.read_text() == "earlier content\n" + text


def test_selected_jobs_and_fail_fast(tmp_path, double):
    config(tmp_path, double, FAILING_JOB)
    only = run_iket("run", "multi", cwd=tmp_path)
    assert only.code == 0, only
    assert [j["name"] for j in run_manifest(tmp_path)["jobs"]] == ["multi"]
    unknown = run_iket("run", "nope", cwd=tmp_path)
    assert unknown.code == 2 and "no job named 'nope'" in unknown.stderr
    fast = run_iket("run", "broken", "affine", "multi", "--fail-fast", cwd=tmp_path)
    assert fast.code == 1 and "2 not started (--fail-fast)" in fast.stderr
    assert [j["name"] for j in run_manifest(tmp_path)["jobs"]] == ["broken"]


def test_rerun_failed_runs_only_the_failed_jobs_and_keeps_the_rest(tmp_path, double):
    refused = run_iket("run", "--rerun-failed", cwd=tmp_path)
    assert refused.code == 2, refused  # no configuration yet
    config(tmp_path, double, FAILING_JOB)
    first = run_iket("run", "--rerun-failed", cwd=tmp_path)
    assert first.code == 2 and "--rerun-failed: no earlier run in" in first.stderr, first
    assert run_iket("run", cwd=tmp_path).code == 1
    before = {j["name"]: j for j in run_manifest(tmp_path)["jobs"]}
    (tmp_path / "fail.py").write_text("print('fixed')\n")
    again = run_iket(
        "run", "--rerun-failed", cwd=tmp_path, env={"IKET_DOUBLE_CAPTURE": str(FIXTURES / "affine")}
    )
    assert again.code == 0, again
    assert "iket: broken: ok" in again.stderr and "iket: affine:" not in again.stderr, (
        "only the failed one ran"
    )
    after = {j["name"]: j for j in run_manifest(tmp_path)["jobs"]}
    assert list(after) == ["affine", "multi", "broken"]
    assert after["affine"] == before["affine"] and after["multi"] == before["multi"], "kept as they were"
    assert after["broken"]["status"] == "ok" and run_manifest(tmp_path)["status"] == "ok"
    nothing = run_iket("run", "--rerun-failed", cwd=tmp_path)
    assert nothing.code == 0 and "nothing to rerun" in nothing.stderr, nothing


def test_the_slurm_executor_without_slurm_says_so(tmp_path, double):
    config(tmp_path, double)
    result = run_iket("run", "--executor", "slurm", cwd=tmp_path, env={"PATH": str(tmp_path / "bin")})
    assert result.code == 2, result
    assert "iket: error: sbatch not found: --executor slurm needs Slurm's command-line tools" in result.stderr
    assert "login node" in result.stderr and "Traceback" not in result.stderr


def test_concurrent_jobs_are_pinned_to_gpus(tmp_path, double):
    config(tmp_path, double)
    result = run_iket("run", "--jobs", "auto", cwd=tmp_path, env={"IKET_GPUS": "0,1"})
    assert result.code == 0, result
    gpus = {j["name"]: j["gpu"] for j in run_manifest(tmp_path)["jobs"]}
    assert sorted(gpus.values()) == ["0", "1"]
    pins = (tmp_path / "pins.txt").read_text().split()
    assert sorted(pins) == ["0", "0", "1", "1"], "both passes of each job saw its own GPU"
    assert re.search(r"^\[affine\] ", result.stderr, re.M) and re.search(r"^\[multi\] ", result.stderr, re.M)


def test_baseline_gate_both_ways(tmp_path, double):
    config(tmp_path, double)
    assert run_iket("run", cwd=tmp_path).code == 0
    same = run_iket("run", "--output", "runs2", "--baseline", "runs", "--junit", "j.xml", cwd=tmp_path)
    assert same.code == 0, same
    # make the baseline's copy kernel 150 ns faster than what the new run will measure
    trace = tmp_path / "runs" / "multi" / "iket_pid_0x23f.trace.json"
    data = json.loads(trace.read_text())
    for launch in data["launches"]:
        if launch["kernelName"] == "copy_kernel_kernel":
            for r in launch["ranges"]:
                r["endTs"] -= 150
    trace.unlink()  # a hard link may share it with other captures: write a new file
    trace.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True))
    slower = run_iket(
        "run",
        "--output",
        "runs3",
        "--baseline",
        "runs/run-manifest.json",
        "--fail-over",
        "5%",
        "--junit",
        "j.xml",
        cwd=tmp_path,
    )
    assert slower.code == 1, slower
    jobs = {j["name"]: j for j in run_manifest(tmp_path, "runs3")["jobs"]}
    assert jobs["multi"]["status"] == "regressed" and jobs["affine"]["status"] == "ok"
    assert jobs["multi"]["regressions"][0]["range"] == "copy"
    xmlschema.XMLSchema(FIXTURES / "junit.xsd").validate(tmp_path / "j.xml")
    cases = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert cases.find("testcase[@name='copy_kernel_kernel/copy']/failure") is not None


def test_a_baseline_that_lost_data_fails_the_gate_without_a_completeness_record(tmp_path, double):
    """``run --baseline`` trusted the manifest only: a baseline whose traces lost every record
    (its completeness record gone, as an older capture's) passed with no word."""
    config(tmp_path, double)
    assert run_iket("run", cwd=tmp_path).code == 0
    base = tmp_path / "runs" / "affine"
    record = json.loads((base / "manifest.json").read_text())
    record.pop("completeness", None)  # a capture made before iket kept the record
    (base / "manifest.json").write_text(json.dumps(record))
    trace = base / "iket_pid_0x204.trace.json"
    data = json.loads(trace.read_text())
    for launch in data["launches"]:  # what a budget drop leaves: a launch with no record at all
        launch["ranges"], launch["markers"], launch["warpLifetimes"] = [], [], []
    trace.unlink()
    trace.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True))
    gated = run_iket("run", "--output", "runs2", "--baseline", "runs", cwd=tmp_path)
    assert gated.code == 1, gated
    jobs = {j["name"]: j for j in run_manifest(tmp_path, "runs2")["jobs"]}
    assert jobs["affine"]["status"] == "regressed" and jobs["multi"]["status"] == "ok"
    assert "the gate cannot pass: the baseline is INCOMPLETE" in jobs["affine"]["error"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('colour = "red"\n[[jobs]]\nname = "a"\ntarget = "w.py"\n', "iket.toml: colour: unknown key"),
        (
            'timeout = "soon"\n[[jobs]]\nname = "a"\ntarget = "w.py"\n',
            "iket.toml: timeout: should be int or float",
        ),
        (
            '[[jobs]]\nname = "a"\ntarget = "w.py"\n[[jobs]]\nname = "a"\ntarget = "w.py"\n',
            "jobs[1].name: 'a' is used twice",
        ),
        ('[[jobs]]\nname = "a"\n', "jobs[0]: give exactly one of target or command"),
        ('[[jobs]]\nname = "a"\ntarget = "w.py"\ncommand = ["x"]\n', "give exactly one of target or command"),
        ('[[jobs]]\ntarget = "w.py"\n', "jobs[0].name is missing"),
        ('[[jobs]]\nname = "a"\ntarget = "w.py"\nretries = 3\n', "jobs[0].retries: unknown key"),
        ('[[jobs]]\nname = "a"\ntarget = "w.py"\nenv = { X = 1 }\n', "jobs[0].env.X: should be a string"),
        ('output = "x"\n', "jobs: no job defined"),
        ('executor = "k8s"\n[[jobs]]\nname = "a"\ntarget = "w.py"\n', "executor: 'k8s' is not an executor"),
        (
            '[slurm]\nnodes = 2\n[[jobs]]\nname = "a"\ntarget = "w.py"\n',
            "iket.toml: slurm.nodes: unknown key",
        ),
        (
            '[[jobs]]\nname = "a"\ntarget = "w.py"\nslurm = { gpus = -1 }\n',
            "jobs[0].slurm.gpus: should be 0 or more",
        ),
        (
            '[[jobs]]\nname = "a"\ntarget = "w.py"\nslurm = { extra = ["--x", 1] }\n',
            "jobs[0].slurm.extra: every item must be a string",
        ),
        ("[[jobs\n", "not valid TOML"),
    ],
)
def test_config_errors_name_file_and_key(tmp_path, text, message):
    (tmp_path / "iket.toml").write_text(text)
    result = run_iket("run", cwd=tmp_path)
    assert result.code == 2, result
    assert message in result.stderr and "Traceback" not in result.stderr


def test_pyproject_table_and_missing_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.iket]\nbogus = 1\n[[tool.iket.jobs]]\nname = "a"\ntarget = "w"\n'
    )
    result = run_iket("run", cwd=tmp_path)
    assert result.code == 2 and "pyproject.toml: tool.iket.bogus: unknown key" in result.stderr
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    none = run_iket("run", cwd=tmp_path)
    assert none.code == 2 and "no iket configuration here" in none.stderr


def test_the_junit_schema_is_not_vacuous(tmp_path):
    schema = xmlschema.XMLSchema(FIXTURES / "junit.xsd")
    bad = (
        '<testsuites><testsuite name="x" tests="1" failures="0" errors="0" time="1"><testcase name="a"/>'
        "</testsuite></testsuites>"
    )
    assert not schema.is_valid(bad), "a test case without classname and time is refused"
