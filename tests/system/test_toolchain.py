import os
import sys
from pathlib import Path

import pytest

from iket_cli.errors import ExitCode, ToolchainError
from iket_cli.system import toolchain


def executable(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4.8.1", (4, 8, 1)), ("4.10.0rc1", (4, 10, 0)), ("4.7", (4, 7)), ("5", (5,)), ("dev", ())],
)
def test_parse_version(text, expected):
    assert toolchain.parse_version(text) == expected


def test_lookup_order(tmp_path, monkeypatch):
    flag = executable(tmp_path / "flag" / "run-iket")
    from_env = executable(tmp_path / "env" / "run-iket")
    beside = executable(tmp_path / "venv" / "bin" / "run-iket")
    on_path = executable(tmp_path / "path" / "run-iket")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
    env = {"IKET_RUN_IKET": str(from_env), "PATH": str(on_path.parent)}
    assert toolchain._locate(str(flag), env) == str(flag)
    assert toolchain._locate(None, env) == str(from_env)
    assert toolchain._locate(None, {"PATH": env["PATH"]}) == str(beside)
    beside.unlink()
    assert toolchain._locate(None, {"PATH": env["PATH"]}) == str(on_path)


def test_nothing_found_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(ToolchainError, match="run-iket is not installed") as info:
        toolchain.find(None, {"PATH": str(tmp_path)})
    assert "pip install 'nvidia-cutlass-dsl-libs-base>=4.8.1'" in info.value.hint
    assert info.value.exit_code == ExitCode.USAGE


def test_own_install_is_described_in_process():
    tool = toolchain.find()
    assert tool.version == "4.8.1"
    assert Path(tool.dsl_packages, "iket", "__init__.py").is_file()


def test_child_env_fixes_the_packaging_hole(tmp_path):
    tool = toolchain.RunIket(str(tmp_path / "bin" / "run-iket"), "4.8.1", str(tmp_path))
    env = tool.child_env({"PYTHONPATH": "/mine", "PATH": "/usr/bin"})
    assert env["PYTHONPATH"] == f"{tmp_path}{os.pathsep}/mine"
    assert env["PATH"].split(os.pathsep)[0] == str(tmp_path / "bin")
    assert env["TVM_TIRX_IKET_INJECTED_CHILD_ENABLE"] == "1"


def test_shebang_interpreter(tmp_path):
    assert (
        toolchain._interpreter(str(executable(tmp_path / "a", "#!/usr/bin/python3 -u\n")))
        == "/usr/bin/python3"
    )
    env_form = executable(tmp_path / "b", "#!/usr/bin/env sh\n")
    assert toolchain._interpreter(str(env_form)).endswith("/sh")
    assert toolchain._interpreter(str(executable(tmp_path / "c", "echo\n"))) is None


def test_foreign_injection_refused():
    toolchain.refuse_foreign_injection({})
    with pytest.raises(ToolchainError, match="Nsight or another CUPTI tool"):
        toolchain.refuse_foreign_injection({"CUDA_INJECTION64_PATH": "/x.so"})


def test_the_own_distribution_is_what_importlib_metadata_says():
    """The libs-base beside the CLI, found by its .dist-info folder, is the version and the
    dsl_packages folder importlib.metadata gives."""
    from importlib import metadata

    dist = metadata.distribution(toolchain.DISTRIBUTION)
    expected = (dist.version, str(dist.locate_file("nvidia_cutlass_dsl/dsl_packages")))
    assert toolchain.own_distribution() == expected
    assert Path(expected[1]).is_dir()
