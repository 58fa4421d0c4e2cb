"""Slurm's tools as iket drives them: sbatch arguments, and the real tools' parseable output."""

from __future__ import annotations

import time

import pytest

from iket_cli.errors import ToolchainError
from iket_cli.system import slurm_cli


def test_a_slurm_table_becomes_sbatch_arguments():
    table = {
        "partition": "gpu",
        "account": "kern",
        "time": 30,
        "gpus": 2,
        "cpus": 8,
        "extra": ["--exclusive"],
    }
    assert slurm_cli.options(table) == [
        "--partition=gpu",
        "--account=kern",
        "--cpus-per-task=8",
        "--time=30",
        "--gres=gpu:2",
        "--exclusive",
    ]
    assert slurm_cli.options({}) == ["--gres=gpu:1"], "one GPU per job unless told"
    assert slurm_cli.options({"gpus": 0, "time": "1:30:00"}) == ["--time=1:30:00"]


def test_without_slurm_tools_the_error_names_them(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainError, match="sbatch not found: --executor slurm needs"):
        slurm_cli.submit(tmp_path / "x.sbatch", [], cwd=tmp_path, log=tmp_path / "x.log", name="x")
    answers, detail = slurm_cli.cluster_answer()
    assert not answers and detail.startswith("not on PATH: sbatch, squeue")


def wait_until_finished(job_id: str) -> slurm_cli.SlurmJob:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = slurm_cli.poll([job_id]).get(job_id)
        if job is not None and job.finished:
            return slurm_cli.details(job)
        time.sleep(0.3)
    raise AssertionError(f"Slurm job {job_id} did not finish")


@pytest.mark.usefixtures("slurm_cluster")
def test_a_real_job_submitted_watched_and_read_back(tmp_path):
    script = tmp_path / "exit3.sh"
    script.write_text("#!/bin/sh\necho on the node\nexit 3\n")
    job_id = slurm_cli.submit(
        script, ["--time=1"], cwd=tmp_path, log=tmp_path / "exit3.log", name="iket-test"
    )
    job = wait_until_finished(job_id)
    assert (job.state, job.exit_code, job.signal, job.phase) == ("FAILED", 3, 0, "failed")
    assert job.node and job.submitted and job.started and job.ended
    assert job.record()["run_s"] is not None and job.record()["queued_s"] is not None
    assert (tmp_path / "exit3.log").read_text() == "on the node\n"
    answers, detail = slurm_cli.cluster_answer()
    assert answers and "the cluster answers" in detail


@pytest.mark.usefixtures("slurm_cluster")
def test_a_real_job_cancelled(tmp_path):
    script = tmp_path / "sleep.sh"
    script.write_text("#!/bin/sh\nsleep 120\n")
    job_id = slurm_cli.submit(script, [], cwd=tmp_path, log=tmp_path / "sleep.log", name="iket-test")
    slurm_cli.cancel([job_id])
    job = wait_until_finished(job_id)
    assert (job.state, job.phase) == ("CANCELLED", "cancelled")
    assert slurm_cli.poll(["999999999"]) == {}, "an id Slurm never knew is no job, not an error"
