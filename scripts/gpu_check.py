"""Every GPU check of iket, in one file: ``python -m pytest -m gpu scripts/gpu_check.py``.

Run on the GPU machine (see README, "GPU checks"). Skipped where there is no NVIDIA GPU,
no run-iket or no TIRx. Each test captures one of the workloads in ``examples/`` with
the real ``iket profile`` and checks the result.
With ``$IKET_GPU_KEEP`` set, the manifests and logs are copied into that folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "examples"  # the workloads that made tests/fixtures/{affine,multi,spawn}

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
    pytest.mark.skipif(importlib.util.find_spec("tvm_tirx") is None, reason="TIRx is not installed"),
]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for name in ("profile_affine.py", "multi_kernel.py", "spawner.py"):
        shutil.copy(WORKLOADS / name, tmp_path / name)
    return tmp_path


def iket(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "iket_cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def keep(name: str, folder: Path) -> None:
    out = os.environ.get("IKET_GPU_KEEP")
    if out:
        for what in ("manifest.json", "iket.log"):
            if (folder / what).exists():
                shutil.copy(folder / what, Path(out) / f"{name}.{what}")


def trace(folder: Path, process: dict) -> dict:
    return json.loads((folder / process["artifacts"]["trace_json"]["path"]).read_text())


def names(data: dict, launch: dict, kind: str) -> list[str]:
    key = "rangeNameIdx" if kind == "ranges" else "markerNameIdx"
    return [data["stringTable"][item[key]] for item in launch[kind]]


def test_script_with_its_own_iket_run_main(work):
    proc = iket("profile", "profile_affine.py", "-o", "cap", cwd=work)
    keep("affine-script", work / "cap")
    assert proc.returncode == 0
    record = json.loads((work / "cap" / "manifest.json").read_text())
    (process,) = record["processes"]
    data = trace(work / "cap", process)
    (launch,) = data["launches"]
    assert launch["kernelName"] == "profiled_affine_kernel"
    assert names(data, launch, "ranges") == ["affine"] and names(data, launch, "markers") == ["loaded"]
    assert any("H200" in gpu["name"] for gpu in record["versions"]["gpus"])
    assert all(record["phases"][p] is not None for p in ("tracker", "capture", "postprocess"))


def test_function_target(work):
    proc = iket("profile", "profile_affine.py:workload", "-o", "cap", "--json", cwd=work)
    keep("affine-function", work / "cap")
    assert proc.returncode == 0
    record = json.loads(proc.stdout)
    (process,) = record["processes"]
    assert process["kernels"] == [{"name": "profiled_affine_kernel", "launches": 1}]
    assert (process["ranges"], process["markers"]) == (1, 1)
    for kind in ("trace_json", "perfetto", "html", "pftrace_gz"):
        assert (work / "cap" / process["artifacts"][kind]["path"]).stat().st_size > 0
    assert not (work / "iket_affine_trace").exists(), "the __main__ block did not run"


def test_two_kernels(work):
    proc = iket("profile", "multi_kernel.py", "-o", "cap", "--keep", cwd=work)
    keep("multi", work / "cap")
    assert proc.returncode == 0
    (process,) = json.loads((work / "cap" / "manifest.json").read_text())["processes"]
    assert process["kernels"] == [
        {"name": "scale_loop_kernel", "launches": 3},
        {"name": "copy_kernel_kernel", "launches": 1},
    ]
    assert (process["ranges"], process["markers"]) == (208, 192)
    assert (work / "cap" / "tracker").is_dir() and (work / "cap" / "iket").is_dir()


def test_two_processes(work):
    proc = iket("profile", "spawner.py", "-o", "cap", cwd=work)
    keep("spawn", work / "cap")
    assert proc.returncode == 0
    record = json.loads((work / "cap" / "manifest.json").read_text())
    processes = record["processes"]
    assert len(processes) == 2
    assert record["status"] == "ok" and record["drift"] == [], "the passes agree"
    for process in processes:
        assert process["kernels"] == [{"name": "profiled_affine_kernel", "launches": 1}]
        label = process["labels"]  # the start-up hook ran in both children
        assert label["argv"][1:3] == ["-c", "import profile_affine as p; p.workload()"]
        assert label["gpu"] and "H200" in label["gpu"], "torch used CUDA: device recorded at exit"


def test_failure_after_success_keeps_the_capture(work):
    assert iket("profile", "profile_affine.py:workload", "-o", "cap", cwd=work).returncode == 0
    before = {p.name: p.read_bytes() for p in (work / "cap").iterdir()}
    (work / "bad.py").write_text("import profile_affine as p\np.workload()\nraise SystemExit(5)\n")
    proc = iket("profile", "bad.py", "-o", "cap", "--clobber", cwd=work)
    assert proc.returncode == 1
    assert "status 5 in the tracker pass" in proc.stderr
    assert {p.name: p.read_bytes() for p in (work / "cap").iterdir()} == before


def test_postprocess_matches_run_iket(work):
    """A fresh H200 capture kept raw: iket postprocess and run-iket postprocess agree."""
    assert (
        iket(
            "profile", "multi_kernel.py", "-o", "cap", "--keep", "--postprocess", "none", cwd=work
        ).returncode
        == 0
    )
    for name in ("ours", "theirs"):
        shutil.copytree(work / "cap", work / name)
    assert iket("postprocess", "ours", "--format", "all", cwd=work).returncode == 0
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    subprocess.run(
        [shutil.which("run-iket"), "postprocess", "theirs", "--format", "all"],
        cwd=work,
        check=True,
        env=env,
        capture_output=True,
    )
    record = json.loads((work / "ours" / "manifest.json").read_text())
    (process,) = record["processes"]
    assert record["phases"]["postprocess"] is not None
    for kind in ("trace_json", "perfetto", "html"):
        name = process["artifacts"][kind]["path"]
        assert (work / "ours" / name).read_bytes() == (work / "theirs" / name).read_bytes(), name


def test_show_lint_and_timeline_on_a_real_capture(work):
    assert iket("profile", "profile_affine.py:workload", "-o", "cap", cwd=work).returncode == 0
    shown = iket("show", "cap", "--format", "json", cwd=work)
    (process,) = json.loads(shown.stdout)["processes"]
    (kernel,) = process["kernels"]
    assert kernel["ranges"][0]["name"] == "affine" and kernel["markers"][0]["name"] == "loaded"
    assert iket("lint", "cap", "--strict", cwd=work).returncode == 0
    assert "affine" in iket("show", "cap", "--timeline", cwd=work).stdout


def test_run_three_jobs_then_gate(work):
    (work / "iket.toml").write_text(
        'output = "runs"\n'
        '[[jobs]]\nname = "affine"\ntarget = "profile_affine.py:workload"\n'
        '[[jobs]]\nname = "multi"\ntarget = "multi_kernel.py"\n'
        '[[jobs]]\nname = "spawn"\ntarget = "spawner.py"\n'
    )
    first = iket("run", "--jobs", "1", "--junit", "junit.xml", "--summary", "summary.md", cwd=work)
    assert first.returncode == 0
    jobs = json.loads((work / "runs" / "run-manifest.json").read_text())["jobs"]
    assert [j["status"] for j in jobs] == ["ok", "ok", "ok"]
    gated = iket(
        "run", "--jobs", "1", "--output", "runs2", "--baseline", "runs", "--fail-over", "25%", cwd=work
    )
    assert gated.returncode == 0, "the same workloads again: no regression beyond noise"
    out = os.environ.get("IKET_GPU_KEEP")
    if out:
        shutil.copy(work / "summary.md", Path(out) / "run-summary.md")
        shutil.copy(work / "runs" / "run-manifest.json", Path(out) / "run-manifest.json")


def test_doctor_lists_the_gpu(work):
    proc = iket("doctor", cwd=work)
    assert proc.returncode == 0 and "H200" in proc.stdout
    out = os.environ.get("IKET_GPU_KEEP")
    if out:
        (Path(out) / "doctor.txt").write_text(proc.stdout)
