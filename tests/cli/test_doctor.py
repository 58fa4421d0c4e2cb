import json
import shutil

from conftest import run_iket


def test_doctor_on_this_machine(tmp_path):
    result = run_iket("doctor", "--json", cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["run-iket"]["ok"] and checks["IKET decoder"]["ok"]
    has_gpu = shutil.which("nvidia-smi") is not None and checks["GPU"]["ok"]
    assert result.code == (0 if has_gpu else 1), result
    if not has_gpu:
        assert "cannot capture yet: GPU" in result.stderr and "Traceback" not in result.stderr


def test_doctor_names_what_is_missing(tmp_path):
    result = run_iket(
        "doctor", cwd=tmp_path, env={"CUDA_INJECTION64_PATH": "/x.so", "IKET_RUN_IKET": "/none"}
    )
    assert result.code == 1
    assert "FAIL run-iket: run-iket given by IKET_RUN_IKET (/none) is not an executable file" in result.stdout
    assert "FAIL CUDA_INJECTION64_PATH: /x.so" in result.stdout
