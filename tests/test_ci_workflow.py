"""docs/github-actions.yml's capture step, run on this CPU with the bundled example config.

The workflow's "Capture" step is read out of the YAML and run by bash as the runner would,
in a copy of the repository layout: ``examples/iket.toml`` as shipped, CPU stand-ins for
its workloads, and run-iket's test double (the real run-iket, with the capture pass's raw
output replayed from an H200 capture) in place of the GPU. Then once more with the first
run as the baseline, as a pull request would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xmlschema

from conftest import FIXTURES, ROOT, replay

WORKFLOW = ROOT / "docs" / "github-actions.yml"


def step(name: str, workflow: Path = WORKFLOW) -> tuple[str, dict[str, str]]:
    """The ``run:`` script and ``env:`` of the workflow step called ``name`` (plain YAML subset)."""
    lines = workflow.read_text().splitlines()
    start = lines.index(f"      - name: {name}")
    script, env, mode = [], {}, None
    for line in lines[start + 1 :]:
        if line.startswith("      - "):
            break
        if line.strip() == "run: |":
            mode = "run"
        elif line.strip() == "env:":
            mode = "env"
        elif mode == "run" and line.startswith("          "):
            script.append(line[10:])
        elif mode == "env" and line.startswith("          "):
            key, _, value = line.strip().partition(": ")
            env[key] = value
    return "\n".join(script) + "\n", env


def checkout(tmp_path: Path) -> Path:
    """The repository as the runner sees it, with CPU stand-ins for the example workloads."""
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "iket.toml", repo / "examples" / "iket.toml")
    (repo / "examples" / "profile_affine.py").write_text("def workload():\n    print('affine')\n")
    (repo / "examples" / "multi_kernel.py").write_text("print('multi')\n")
    (repo / "examples" / "spawner.py").write_text("print('spawn')\n")
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "activate").write_text(f'export PATH="{Path(sys.executable).parent}:$PATH"\n')
    return repo


def run_step(repo: Path, double: Path) -> subprocess.CompletedProcess:
    script, env = step("Capture")
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=repo,
        env={**os.environ, **env, **replay("affine"), "IKET_RUN_IKET": str(double)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_capture_step_runs_then_gates_against_its_baseline(tmp_path, double):
    repo = checkout(tmp_path)
    first = run_step(repo, double)
    assert first.returncode == 0, first.stderr[-3000:]
    record = json.loads((repo / "iket-runs" / "run-manifest.json").read_text())
    statuses = [(j["name"], j["status"]) for j in record["jobs"]]
    assert statuses == [("affine", "ok"), ("multi", "ok"), ("spawn", "ok")]
    assert record["gate"] is None
    xmlschema.XMLSchema(str(FIXTURES / "junit.xsd")).validate(str(repo / "iket-junit.xml"))
    shutil.copytree(repo / "iket-runs", repo / "iket-baseline")  # what the Baseline step downloads
    shutil.rmtree(repo / "iket-runs")
    second = run_step(repo, double)
    assert second.returncode == 0, second.stderr[-3000:]
    gated = json.loads((repo / "iket-runs" / "run-manifest.json").read_text())
    assert gated["gate"] == {"baseline": "iket-baseline", "fail_over": "5%"}
    assert [j["status"] for j in gated["jobs"]] == ["ok", "ok", "ok"]
    assert all(j["regressions"] == [] for j in gated["jobs"]), "the same captures: no regression"
    assert "--baseline iket-baseline --fail-over 5%" in step("Capture")[0]


@pytest.mark.usefixtures("slurm_cluster")
def test_the_slurm_recipe_submits_every_job_and_gates(tmp_path, double):
    """docs/github-actions-slurm.yml's capture step on the one-node Slurm of the CI machine
    (which has no GPU: the example configuration gets ``gpus = 0``)."""
    repo = checkout(tmp_path)
    with open(repo / "examples" / "iket.toml", "a") as handle:
        handle.write("\n[slurm]\ngpus = 0\npoll = 1\n")
    shared = tmp_path / "shared"
    (shared / "venv").mkdir(parents=True)
    shutil.copytree(repo / ".venv", shared / "venv", dirs_exist_ok=True)
    script, env = step("Capture", ROOT / "docs" / "github-actions-slurm.yml")

    def capture() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=repo,
            env={
                **os.environ,
                **env,
                **replay("affine"),
                "IKET_RUN_IKET": str(double),
                "IKET_SHARED": str(shared),
            },
            capture_output=True,
            text=True,
            timeout=300,
        )

    first = capture()
    assert first.returncode == 0, first.stderr[-3000:]
    record = json.loads((repo / "iket-runs" / "run-manifest.json").read_text())
    assert record["executor"] == "slurm"
    assert [(j["name"], j["status"], j["slurm"]["state"]) for j in record["jobs"]] == [
        ("affine", "ok", "COMPLETED"),
        ("multi", "ok", "COMPLETED"),
        ("spawn", "ok", "COMPLETED"),
    ]
    xmlschema.XMLSchema(str(FIXTURES / "junit.xsd")).validate(str(repo / "iket-junit.xml"))
    shutil.copytree(repo / "iket-runs", repo / "iket-baseline")
    second = capture()
    assert second.returncode == 0, second.stderr[-3000:]
    gated = json.loads((repo / "iket-runs" / "run-manifest.json").read_text())
    assert gated["gate"] == {"baseline": "iket-baseline", "fail_over": "5%"}
    assert [j["status"] for j in gated["jobs"]] == ["ok", "ok", "ok"]
