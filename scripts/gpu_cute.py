"""The CuTe DSL checks of iket on the GPU: ``python -m pytest -m gpu scripts/gpu_cute.py``.

Run by ``scripts/gpu_run.sh cute`` after the two-call recipe loaded the CuTe DSL stack
(docs/cute.md). Skipped where there is no NVIDIA GPU or no ``cutlass``. Each test captures
one of ``examples/cute_*.py`` (or the probe ``scripts/cute_unmatched.py``) with the real
``iket profile`` and checks what iket shows against a recount of run-iket's JSON made here
with ``json`` alone. With ``$IKET_GPU_KEEP`` set, every capture folder is copied into ``cute/`` there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [*sorted((ROOT / "examples").glob("cute_*.py")), ROOT / "scripts" / "cute_unmatched.py"]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
    pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="CuTe DSL is not installed"),
]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for source in SOURCES:
        shutil.copy(source, tmp_path / source.name)
    return tmp_path


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, *args]
    proc = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def iket(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run("-m", "iket_cli", *args, cwd=cwd)


def keep(name: str, folder: Path) -> None:
    """Copy a whole capture folder into ``$IKET_GPU_KEEP/cute/<name>`` (when set)."""
    out = os.environ.get("IKET_GPU_KEEP")
    if out and folder.exists():
        shutil.copytree(folder, Path(out) / "cute" / name, dirs_exist_ok=True)


def capture(work: Path, target: str, name: str) -> tuple[dict, dict, Path]:
    """``iket profile target -o name --keep``: the manifest, the single process's JSON, the folder."""
    proc = iket("profile", target, "-o", name, "--keep", cwd=work)
    keep(name, work / name)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((work / name / "manifest.json").read_text())
    (process,) = record["processes"]
    path = work / name / process["artifacts"]["trace_json"]["path"]
    return record, process, path


def warp_roles(folder: Path) -> dict[str, range]:
    """kernel_symbols.json's warp roles, read here without iket."""
    warps = json.loads((folder / "kernel_symbols.json").read_text())["warps"]
    return {role: range(span["warp_start"], span["warp_end"]) for role, span in warps.items()}


def recount(path: Path, warps: range | None = None) -> dict:
    """(kernel, range name) -> (count, total, min, max) of the JSON, optionally for some warps."""
    doc = json.loads(path.read_text())
    found: dict = defaultdict(list)
    for launch in doc["launches"]:
        for r in launch["ranges"]:
            warp = doc["locationTable"][r["warpLocIdxs"][0]]["warpId"]
            if warps is None or warp in warps:
                found[(launch["kernelName"], doc["stringTable"][r["rangeNameIdx"]])].append(
                    r["endTs"] - r["startTs"]
                )
    return {key: (len(v), sum(v), min(v), max(v)) for key, v in found.items()}


def shown(stdout: str) -> dict[str, dict]:
    """``iket show --format json``'s range statistics per group (role or '')."""
    groups: dict[str, dict] = defaultdict(dict)
    for process in json.loads(stdout)["processes"]:
        for kernel in process["kernels"]:
            for row in kernel["ranges"]:
                d = row["durations"]
                groups[process["group"]][(kernel["kernel"], row["name"])] = (
                    d["count"],
                    d["total"],
                    d["min"],
                    d["max"],
                )
    return groups


def recounted_payloads(path: Path) -> dict[str, set]:
    """Mark name -> the distinct payload values (fp32 bit patterns decoded), from the JSON."""
    doc = json.loads(path.read_text())
    found: dict[str, set] = defaultdict(set)
    for launch in doc["launches"]:
        for m in launch["markers"]:
            if "payloadType" in m:
                value = m["payloadVal"]
                if m["payloadType"] == 13:
                    value = struct.unpack("<f", struct.pack("<I", value))[0]
                found[doc["stringTable"][m["markerNameIdx"]]].add(value)
    return found


@pytest.mark.parametrize("example", ["cute_affine.py", "cute_pipeline.py"])
def test_the_example_is_correct_on_its_own(work, example):
    proc = run(example, cwd=work)
    assert proc.returncode == 0 and "correct" in proc.stdout


@pytest.mark.parametrize("form", ["", ":workload"])
@pytest.mark.parametrize("example", ["cute_affine", "cute_pipeline"])
def test_show_equals_a_recount(work, example, form):
    name = f"{example}{form.replace(':', '_')}"
    record, _, path = capture(work, f"{example}.py{form}", name)
    assert record["dsl_cache"]["set_by"] == "iket", "the compile cache is off in both passes"
    result = iket("show", name, "--format", "json", cwd=work)
    assert result.returncode == 0, result.stderr
    assert shown(result.stdout)[""] == recount(path)
    assert recount(path), "ranges were captured"


def test_payloads_and_roles_of_the_pipeline(work):
    record, process, path = capture(work, "cute_pipeline.py", "roles")
    assert record["annotations"]["roles"] == "kernel_symbols.json"
    assert {(s["op"], s["name"]) for s in process["payload_sites"]} >= {
        ("range_start", "load"),
        ("mark", "stage_full"),
    }
    assert not [f for f in record.get("lint", []) if f["code"] in ("payload-type", "unmatched")], record[
        "lint"
    ]
    assert any(dag.endswith(".iket_dag.json") for dag in record["annotations"]["dags"])
    assert process["flows"] > 0 and (work / "roles" / process["artifacts"]["flows"]["path"]).exists()
    by_role = iket("show", "roles", "--by", "role", "--format", "json", cwd=work)
    assert by_role.returncode == 0, by_role.stderr
    groups = shown(by_role.stdout)
    for role, warps in warp_roles(work / "roles").items():
        assert groups[f"role {role}"] == recount(path, warps), role
    text = iket("show", "roles", "--by", "role", cwd=work)
    assert "Producer" in text.stdout and "Consumer" in text.stdout
    payload = iket("show", "roles", "--payload", "--format", "json", cwd=work)
    assert payload.returncode == 0, payload.stderr
    rows = {(r["kind"], r["name"]): r for p in json.loads(payload.stdout)["processes"] for r in p["payloads"]}
    for mark, values in recounted_payloads(path).items():
        row = rows[("mark", mark)]
        assert row["count"] >= len(values) and row["min"] == min(values) and row["max"] == max(values)
    assert iket("report", "roles", cwd=work).returncode == 0


def test_unmatched_and_mixed_payloads_are_linted(work):
    """The probe leaves a range_start and a range_push open and mixes Int32/Float32 payloads;
    the trace shows neither (the decoder drops the first and relabels the second)."""
    proc = iket("profile", "cute_unmatched.py", "-o", "unmatched", "--keep", cwd=work)
    keep("unmatched", work / "unmatched")
    assert proc.returncode == 0, proc.stderr
    assert "[unmatched]" in proc.stderr and "[payload-type]" in proc.stderr, "told at capture"
    result = iket("lint", "unmatched", "--format", "json", cwd=work)
    (process,) = json.loads(result.stdout)["processes"]
    found = {(f["code"], f["message"].split(":")[0]) for f in process["findings"]}
    assert found >= {
        ("payload-type", "'value' is compiled with payloads of types f32, i32"),
        ("unmatched", "range_start or range_end of 'open' without its partner"),
        ("unmatched", "range_push('dangling') never popped"),
    }, found
