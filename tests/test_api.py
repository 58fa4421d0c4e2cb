"""The Python API: ``iket_cli.profile`` and ``Capture``."""

import json
import shutil
import signal

import pytest

import iket_cli
from iket_cli.errors import ExitCode, MultiProcessError, OutputDirError
from iket_cli.system.signals import ALL_STOPS

from conftest import FIXTURES, manifest_text


@pytest.fixture(autouse=True)
def replayed(monkeypatch, tmp_path):
    monkeypatch.setenv("PASSES", str(tmp_path / "passes.jsonl"))
    (tmp_path / "w.py").write_text("def workload():\n    print('ran')\n")


def test_profile_returns_a_capture(tmp_path, double, monkeypatch):
    monkeypatch.setenv("IKET_DOUBLE_CAPTURE", str(FIXTURES / "affine"))
    handlers = {signum: signal.getsignal(signum) for signum in ALL_STOPS}
    capture = iket_cli.profile(
        "w.py:workload", output_dir=tmp_path / "cap", cwd=tmp_path, run_iket=str(double)
    )
    # the caller's program goes on: its signal handlers are its own again (only the CLI,
    # which exits right after, holds them past a published capture)
    assert {signum: signal.getsignal(signum) for signum in ALL_STOPS} == handlers
    assert capture.output_dir == tmp_path / "cap"
    assert capture.trace_json == tmp_path / "cap" / "iket_pid_0x204.trace.json"
    assert capture.perfetto.is_file() and capture.html.is_file()
    assert capture.manifest["command"] is None
    assert json.loads(capture.trace_json.read_text())["launches"][0]["kernelName"] == "profiled_affine_kernel"
    again = iket_cli.Capture.load(tmp_path / "cap")
    assert again.manifest == capture.manifest and again.processes == capture.processes


def test_a_list_is_a_command(tmp_path, double, monkeypatch):
    monkeypatch.setenv("IKET_DOUBLE_CAPTURE", str(FIXTURES / "affine"))
    capture = iket_cli.profile(
        ["sh", "-c", "echo hello"],
        output_dir=tmp_path / "cap",
        cwd=tmp_path,
        run_iket=str(double),
        postprocess="perfetto",
    )
    assert capture.manifest["target"]["kind"] == "command"
    assert capture.perfetto.is_file()
    with pytest.raises(iket_cli.IketError, match="has no trace_json"):
        _ = capture.trace_json


def test_many_processes_name_the_list(tmp_path, double, monkeypatch):
    monkeypatch.setenv("IKET_DOUBLE_CAPTURE", str(FIXTURES / "spawn"))
    capture = iket_cli.profile(
        "w.py:workload", output_dir=tmp_path / "cap", cwd=tmp_path, run_iket=str(double)
    )
    assert len(capture.processes) == 2
    with pytest.raises(MultiProcessError, match="holds 2 processes") as info:
        _ = capture.html
    assert "capture.processes[i].html" in info.value.hint


def test_failures_raise_the_one_family(tmp_path, double):
    shutil.copytree(FIXTURES / "affine", tmp_path / "taken")
    (tmp_path / "taken" / "manifest.json").write_text(manifest_text())
    with pytest.raises(OutputDirError) as info:
        iket_cli.profile("w.py:workload", output_dir=tmp_path / "taken", cwd=tmp_path, run_iket=str(double))
    assert isinstance(info.value, iket_cli.IketError)
    assert info.value.exit_code == ExitCode.USAGE


def test_import_is_cheap():
    import subprocess
    import sys

    code = "import iket_cli, sys; print(sorted(m for m in ('click', 'rich', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_imports_nothing_heavy():
    """`iket --help` must start fast: no rich, no capture machinery, no decoder, no torch."""
    import subprocess
    import sys

    code = (
        "import sys, io, contextlib\n"
        "from iket_cli.cli import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--help'], standalone_mode=False)\n"
        "heavy = ('rich', 'iket_cli.capture', 'iket_cli.pipeline', 'iket', 'torch', 'tvm_tirx')\n"
        "print(sorted(m for m in sys.modules if m in heavy or m.startswith('iket_cli.cli.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", "not even the subcommands' own modules"
