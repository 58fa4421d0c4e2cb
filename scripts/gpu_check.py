"""Every GPU check of iket, in one file: ``python -m pytest -m gpu scripts/gpu_check.py``.

Run on the GPU machine (see docs/development.md). Skipped where there is no NVIDIA GPU,
no run-iket or no TIRx. Each test captures one of the workloads in ``examples/`` with
the real ``iket profile`` and checks the result.
With ``$IKET_GPU_KEEP`` set, the manifests and logs are copied into that folder.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iket_cli.decode.split import chunks
from iket_cli.decode.split import launches as join

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "examples"  # the workloads that made tests/fixtures/{affine,multi,spawn}

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
    pytest.mark.skipif(importlib.util.find_spec("tvm_tirx") is None, reason="TIRx is not installed"),
]


def _this_gpu() -> str:
    """The model of this machine's first GPU as nvidia-smi names it ("H100", "H200"): the checks
    ran on either, and a capture must record the one it ran on."""
    if shutil.which("nvidia-smi") is None:
        return "no GPU"
    names = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.split()
    return next((word for word in names if re.fullmatch(r"[A-Z]\d{2,3}", word)), names[0] if names else "?")


#: The GPU model every capture here must record (the machine's, not one written in).
GPU = _this_gpu()

#: The manifest entry of examples/profile_affine.py's one kernel.
AFFINE = {"name": "profiled_affine_kernel", "short": "profiled_affine_kernel", "launches": 1}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for name in ("profile_affine.py", "multi_kernel.py", "spawner.py", "multi_rank.py"):
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


def keep_file(source: Path, name: str) -> None:
    """Copy one file into ``$IKET_GPU_KEEP`` (when set) under ``name``."""
    out = os.environ.get("IKET_GPU_KEEP")
    if out and source.exists():
        shutil.copy(source, Path(out) / name)


def keep(name: str, folder: Path) -> None:
    for what in ("manifest.json", "iket.log"):
        keep_file(folder / what, f"{name}.{what}")


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
    assert any(GPU in gpu["name"] for gpu in record["versions"]["gpus"])
    assert all(record["phases"][p] is not None for p in ("tracker", "capture", "postprocess"))


def test_function_target(work):
    proc = iket("profile", "profile_affine.py:workload", "-o", "cap", "--json", cwd=work)
    keep("affine-function", work / "cap")
    assert proc.returncode == 0
    record = json.loads(proc.stdout)
    (process,) = record["processes"]
    assert process["kernels"] == [AFFINE]
    assert (process["ranges"], process["markers"]) == (1, 1)
    assert record["warm"]["used"], "one pass ran in the warm standby's worker"
    assert record["warm"]["modules"] == ["torch"], "TIRx initialises CUDA at import: never early"
    for kind in ("trace_json", "perfetto", "html", "pftrace_gz"):
        assert (work / "cap" / process["artifacts"][kind]["path"]).stat().st_size > 0
    from iket_cli.render import report

    page = report.embedded(work / "cap" / process["artifacts"]["html"]["path"])  # the offline report
    shown = iket("show", "cap", "--format", "json", cwd=work)
    (expected,) = json.loads(shown.stdout)["processes"]
    (embedded,) = page["stats"]
    assert Path(expected.pop("trace")).name == embedded.pop("trace")  # relative in the report
    assert embedded == expected, "the report's tables are iket show's numbers"
    assert GPU in page["meta"]["gpu"] and page["perfetto"]["b64"]
    keep_tree("report-affine", work / "cap")
    assert not (work / "iket_affine_trace").exists(), "the __main__ block did not run"


def test_two_kernels(work):
    proc = iket("profile", "multi_kernel.py", "-o", "cap", "--keep", cwd=work)
    keep("multi", work / "cap")
    assert proc.returncode == 0
    (process,) = json.loads((work / "cap" / "manifest.json").read_text())["processes"]
    assert process["kernels"] == [
        {"name": "scale_loop_kernel", "short": "scale_loop_kernel", "launches": 3},
        {"name": "copy_kernel_kernel", "short": "copy_kernel_kernel", "launches": 1},
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
        assert process["kernels"] == [AFFINE]
        label = process["labels"]  # the start-up hook ran in both children
        assert label["argv"][1:3] == ["-c", "import profile_affine as p; p.workload()"]
        assert label["gpu"] and GPU in label["gpu"], "torch used CUDA: device recorded at exit"
        assert label["parent_argv"][-1].endswith("spawner.py"), "labelled by their parent"
    shown = iket("show", "cap", "--format", "csv", cwd=work).stdout
    assert shown.count("(child of ") >= 2


def test_failure_after_success_keeps_the_capture(work):
    assert iket("profile", "profile_affine.py:workload", "-o", "cap", cwd=work).returncode == 0
    before = {p.name: p.read_bytes() for p in (work / "cap").iterdir()}
    (work / "bad.py").write_text("import profile_affine as p\np.workload()\nraise SystemExit(5)\n")
    proc = iket("profile", "bad.py", "-o", "cap", "--clobber", cwd=work)
    assert proc.returncode == 1
    assert "status 5 in the tracker pass" in proc.stderr
    assert {p.name: p.read_bytes() for p in (work / "cap").iterdir()} == before


def keep_tree(name: str, folder: Path) -> None:
    """Copy a whole folder (a raw capture to become a fixture) into $IKET_GPU_KEEP."""
    out = os.environ.get("IKET_GPU_KEEP")
    if out:
        shutil.copytree(folder, Path(out) / name, dirs_exist_ok=True)


def run_iket_postprocess(folder: Path) -> None:
    subprocess.run(
        [shutil.which("run-iket"), "postprocess", str(folder), "--format", "all"],
        check=True,
        capture_output=True,
    )


def test_iket_postprocess_of_a_raw_capture_matches_run_iket(work):
    """A fresh H200 capture kept raw: iket postprocess and run-iket postprocess agree."""
    proc = iket("profile", "multi_kernel.py", "-o", "cap", "--keep", "--postprocess", "none", cwd=work)
    assert proc.returncode == 0
    for name in ("ours", "theirs"):
        shutil.copytree(work / "cap", work / name)
    assert iket("postprocess", "ours", "--format", "all", cwd=work).returncode == 0
    run_iket_postprocess(work / "theirs")
    record = json.loads((work / "ours" / "manifest.json").read_text())
    (process,) = record["processes"]
    assert record["phases"]["postprocess"] is not None
    for kind in ("trace_json", "perfetto"):  # .html is iket's offline report, not run-iket's viewer
        name = process["artifacts"][kind]["path"]
        assert (work / "ours" / name).read_bytes() == (work / "theirs" / name).read_bytes(), name


@pytest.mark.parametrize("iters", [16, 128])
def test_big_launches_decoded_by_ctas_are_run_iket_bytes(work, iters):
    """big_kernel.py (3 launches of 132 CTAs x 12 warps): each launch is decoded in CTA chunks
    by long-lived workers and stitched (ITERS=128: 1.6 MB of raw data a launch, in as many
    chunks as ``decode.split.chunks`` plans; ITERS=16: whole launches): the JSON export is
    run-iket's bytes of the same raw capture, the Perfetto export its bytes, or, where it was
    joined from CTA chunks (the manifest says so), its trace (tests/conftest.perfetto_view)."""
    shutil.copy(ROOT / "tests" / "fixtures" / "workloads" / "big_kernel.py", work / "big_kernel.py")
    env = {**os.environ, "ITERS": str(iters), "LAUNCHES": "3"}
    argv = [
        sys.executable,
        "-m",
        "iket_cli",
        "profile",
        "big_kernel.py",
        "-o",
        "cap",
        "--keep",
        "--postprocess",
        "all",
    ]
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=400)
    print(proc.stderr[-3000:])
    keep(f"big-ctas-{iters}", work / "cap")
    assert proc.returncode == 0
    log = (work / "cap" / "iket.log").read_text()
    (raw,) = (work / "cap" / "iket").glob("pid_*/iket.data.json")
    planned = join.planned_parts(raw, chunks.CHUNK_RAW_BYTES)
    chunked = re.findall(r"json launch 1 of 3, CTAs \d+/(\d+)", log)
    assert bool(chunked) == (iters == 128), "chunked exactly when the launch is big"
    assert not chunked or int(chunked[0]) == planned[0] > 1, (chunked, planned)
    theirs = work / "theirs"
    shutil.copytree(work / "cap", theirs)
    for old in theirs.glob("iket_pid_*"):
        old.unlink()
    start = time.monotonic()
    run_iket_postprocess(theirs)
    record = json.loads((work / "cap" / "manifest.json").read_text())
    (process,) = record["processes"]
    print(
        f"ITERS={iters}: iket postprocess phase {record['phases']['postprocess']} s, "
        f"run-iket postprocess {time.monotonic() - start:.1f} s"
    )
    name = process["artifacts"]["trace_json"]["path"]
    assert (work / "cap" / name).read_bytes() == (theirs / name).read_bytes(), name
    perfetto = process["artifacts"]["perfetto"]
    ours, whole = (work / "cap" / perfetto["path"]).read_bytes(), (theirs / perfetto["path"]).read_bytes()
    print(f"ITERS={iters}: the .pftrace joined: {perfetto.get('joined')}")
    if perfetto.get("joined", {}).get("identity") == "trace":  # split by CTA chunks: the same trace
        sys.path.insert(0, str(ROOT / "tests"))
        from conftest import perfetto_view

        assert perfetto_view(ours) == perfetto_view(whole)
    else:
        assert ours == whole


@pytest.mark.parametrize("workload", ["multi_kernel.py", "spawner.py"])
def test_profile_decodes_as_run_iket_does(work, workload):
    """iket profile's own parallel decode: the artifacts run-iket makes of the same raw capture."""
    proc = iket("profile", workload, "-o", "cap", "--keep", "--postprocess", "all", cwd=work)
    keep(f"decode-{workload}", work / "cap")
    assert proc.returncode == 0
    theirs = work / "theirs"
    shutil.copytree(work / "cap", theirs)
    for old in theirs.glob("iket_pid_*"):
        old.unlink()
    run_iket_postprocess(theirs)
    record = json.loads((work / "cap" / "manifest.json").read_text())
    assert record["phases"]["postprocess"] > 0
    print(f"{workload}: postprocess phase {record['phases']['postprocess']} s")
    for process in record["processes"]:
        for kind in ("trace_json", "perfetto"):  # .html: iket's offline report
            name = process["artifacts"][kind]["path"]
            assert (work / "cap" / name).read_bytes() == (theirs / name).read_bytes(), name
        ours_gz = work / "cap" / process["artifacts"]["pftrace_gz"]["path"]
        theirs_gz = theirs / ours_gz.name
        assert gzip.decompress(ours_gz.read_bytes()) == gzip.decompress(theirs_gz.read_bytes())


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
    keep_file(work / "summary.md", "run-summary.md")
    keep_file(work / "runs" / "run-manifest.json", "run-manifest.json")


def test_doctor_lists_the_gpu(work):
    proc = iket("doctor", cwd=work)
    assert proc.returncode == 0 and GPU in proc.stdout
    (work / "doctor.txt").write_text(proc.stdout)
    keep_file(work / "doctor.txt", "doctor.txt")


def test_drift_between_the_passes_is_caught(work):
    """The second pass launches the kernel once more than the first (a marker file)."""
    (work / "drifting.py").write_text(
        "import os\nimport profile_affine as p\n"
        "p.workload()\n"
        "if os.path.exists('second-pass'):\n    p.workload()\n"
        "open('second-pass', 'w').close()\n"
    )
    proc = iket("profile", "drifting.py", "-o", "cap", "--strict", cwd=work)
    keep("drift", work / "cap" if (work / "cap").is_dir() else work / "cap.failed")
    assert proc.returncode == 1
    if (work / "cap").is_dir():  # the capture pass survived the extra launch: published, suspect
        record = json.loads((work / "cap" / "manifest.json").read_text())
        assert record["status"] == "suspect"
        assert (
            "profiled_affine_kernel: 1 launch(es) in the tracker pass, 2 in the capture pass"
            in (record["drift"])
        )
        assert "tracker and capture passes differ" in proc.stderr
    else:  # the H200 case: the extra launch overflows the buffer sized by the tracker pass
        assert "the capture pass recorded more than the tracker pass" in proc.stderr
        assert "the same kernels the same number of times" in proc.stderr


def test_overhead_of_multi_kernel(work):
    proc = iket("profile", "multi_kernel.py", "-o", "cap", "--overhead", "--keep", "--json", cwd=work)
    keep("overhead", work / "cap")
    keep_tree("warp-trace-multi", work / "cap" / "overhead")
    assert proc.returncode == 0
    found = json.loads(proc.stdout)["overhead"]
    assert found["error"] is None
    kernels = {row["kernel"]: row for row in found["kernels"]}
    assert set(kernels) == {"scale_loop_kernel", "copy_kernel_kernel"}
    for row in kernels.values():
        assert row["uninstrumented_ns"] > 0 and row["instrumented_ns"] > 0
    assert "iket: overhead: scale_loop_kernel" in proc.stderr


def torchrun_capture(work: Path, name: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``iket profile -o ranks -- torchrun ... multi_rank.py`` (two ranks); its manifest."""
    proc = iket(
        "profile",
        "-o",
        "ranks",
        "--",
        "torchrun",
        "--standalone",
        "--nproc-per-node",
        "2",
        "multi_rank.py",
        cwd=work,
    )
    keep(name, work / "ranks")
    assert proc.returncode == 0
    return proc, json.loads((work / "ranks" / "manifest.json").read_text())


def test_torchrun_two_ranks_labelled_then_merged(work):
    proc, record = torchrun_capture(work, "torchrun")
    ranked = [p for p in record["processes"] if p["launches"]]  # torchrun's agent launched none
    ranks = sorted((p["labels"]["rank"], p["labels"]["world_size"]) for p in ranked)
    assert ranks == [(0, 2), (1, 2)], "two traces, one per rank"
    assert "launched no instrumented kernel" in proc.stderr
    for process in ranked:
        assert process["kernels"][0]["name"] == "scale_loop_kernel"
        assert GPU in process["labels"]["gpu"]
    shown = iket("show", "ranks", cwd=work).stdout + iket("show", "ranks", cwd=work).stderr
    assert "rank 0" in shown and "rank 1" in shown
    assert iket("profile", "profile_affine.py:workload", "-o", "affine", cwd=work).returncode == 0
    merged = iket("merge", "merged", "ranks", "affine", "--timeline", cwd=work)
    assert merged.returncode == 0
    record = json.loads((work / "merged" / "manifest.json").read_text())
    assert len([p for p in record["processes"] if p["launches"]]) == 3
    assert (work / "merged" / "timeline.pftrace").stat().st_size > 0
    shown = iket("show", "merged", "--format", "json", cwd=work)
    assert shown.returncode == 0 and len(json.loads(shown.stdout)["processes"]) == 3
    keep("merged", work / "merged")
    keep_file(work / "merged" / "timeline.pftrace", "merged-timeline.pftrace")


# -- two GPUs (issue 9): skipped on a one-GPU machine ------------------------------------


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


two_gpus = pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")


@two_gpus
def test_run_jobs_auto_spreads_over_both_gpus(work):
    (work / "iket.toml").write_text(
        'output = "runs"\n'
        + "".join(f'[[jobs]]\nname = "affine{n}"\ntarget = "profile_affine.py:workload"\n' for n in range(2))
        + '[[jobs]]\nname = "multi0"\ntarget = "multi_kernel.py"\n'
        + '[[jobs]]\nname = "multi1"\ntarget = "multi_kernel.py"\n'
    )
    proc = iket("run", "--jobs", "auto", cwd=work)
    assert proc.returncode == 0
    jobs = json.loads((work / "runs" / "run-manifest.json").read_text())["jobs"]
    assert {j["gpu"] for j in jobs} == {"0", "1"}, "both GPUs busy"
    for job in jobs:
        record = json.loads((work / "runs" / job["manifest"]).read_text())
        (process,) = record["processes"]
        assert process["labels"]["cuda_visible_devices"] == job["gpu"], "each manifest records its GPU"
    keep_file(work / "runs" / "run-manifest.json", "run-manifest-jobs-auto.json")


@two_gpus
def test_torchrun_ranks_on_their_own_gpus(work):
    _, record = torchrun_capture(work, "torchrun-2gpu")
    ranked = {p["labels"]["rank"]: p["labels"] for p in record["processes"] if p["launches"]}
    assert set(ranked) == {0, 1}
    assert {rank: label["cuda_device"] for rank, label in ranked.items()} == {0: 0, 1: 1}


@two_gpus
def test_doctor_lists_both_gpus(work):
    proc = iket("doctor", cwd=work)
    assert proc.returncode == 0 and "0: NVIDIA" in proc.stdout and "1: NVIDIA" in proc.stdout
    (work / "doctor.txt").write_text(proc.stdout)
    keep_file(work / "doctor.txt", "doctor-2gpu.txt")


PROBE = r"""
import importlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import _shim
out = {"before": _shim.cuda_initialized()}
for name in sys.argv[2:]:
    start = time.perf_counter()
    importlib.import_module(name)
    out[name] = [round(time.perf_counter() - start, 2), _shim.cuda_initialized()]
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "modules",
    [["torch"], ["torch", "tvm_tirx"], ["torch", "tvm_tirx", "tvm_tirx.backend.cuda", "tvm_tirx.script"]],
    ids=["torch", "tvm_tirx", "tirx-submodules"],
)
def test_which_imports_initialise_cuda(work, modules):
    """The warm standby's probe on the real driver: what each import costs and whether it
    called cuInit (torch must not: the standby imports it early)."""
    shim_dir = str(Path(__file__).resolve().parent.parent / "iket_cli" / "capture")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, shim_dir, *modules], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.splitlines()[-1])
    print("import seconds and CUDA initialised after each:", found)
    assert found["before"] is False and found["torch"][1] is False
    init = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {shim_dir!r}); import _shim, torch; "
            "torch.cuda.init(); print(_shim.cuda_initialized())",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert init.stdout.strip() == "True", "the probe sees cuInit"
