import json
import shutil

from conftest import run_iket


def test_doctor_on_this_machine(tmp_path):
    result = run_iket("doctor", "--json", cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert list(checks)[:2] == ["Python", "iket-cli"]
    assert checks["run-iket"]["ok"] and checks["IKET decoder"]["ok"], "the libs-base decoder imports"
    assert {"cuda-bindings + NVRTC", "GPU", "TIRx", "CuTe DSL variables"} <= set(checks)
    has_gpu = shutil.which("nvidia-smi") is not None and checks["GPU"]["ok"]
    if not has_gpu:
        assert result.code == 1
        assert "cannot capture yet:" in result.stderr and "GPU" in result.stderr
        assert "Traceback" not in result.stderr
        assert "compute capability 9.0" in checks["GPU"]["fix"]


def test_doctor_names_what_is_missing(tmp_path):
    result = run_iket(
        "doctor",
        cwd=tmp_path,
        env={"CUDA_INJECTION64_PATH": "/x.so", "IKET_RUN_IKET": "/none", "CUTE_DSL_NO_CACHE": "1"},
    )
    assert result.code == 1
    assert "FAIL run-iket: run-iket given by IKET_RUN_IKET (/none) is not an executable file" in result.stdout
    assert "FAIL CUDA_INJECTION64_PATH: /x.so" in result.stdout
    assert "CuTe DSL variables: CUTE_DSL_NO_CACHE=1" in result.stdout


def test_doctor_reports_a_decoder_that_cannot_import(tmp_path):
    """A broken iket package on the path: the decoder check fails by name, no traceback."""
    (tmp_path / "iket").mkdir()
    (tmp_path / "iket" / "__init__.py").write_text("raise ImportError('broken iket for the test')\n")
    result = run_iket("doctor", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert result.code == 1
    assert "FAIL IKET decoder" in result.stdout and "broken iket for the test" in result.stdout
