"""Every refusal and failure of a capture, through the real CLI, with the promise checked.

The exit-code table (docs/faults.md), row by row: usage errors and refused output directories
(2), failed workloads and captures (1), and what each leaves behind.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from iket_cli.capture import outdir
from iket_cli.model import manifest

from conftest import FIXTURES, snapshot

#: (name, iket profile arguments after --run-iket DOUBLE, extra env, expected message)
REFUSED = [
    ("unknown option", ["--bogus", "w.py:workload"], {}, "No such option '--bogus'"),
    ("bad choice", ["--postprocess", "pdf", "w.py"], {}, "Invalid value for '--postprocess'"),
    ("no target", [], {}, "no target given"),
    ("missing script", ["-o", "x", "nope.py"], {}, "script nope.py does not exist"),
    ("missing function", ["-o", "x", "w.py:nope"], {}, "has no function 'nope'"),
    ("not callable", ["-o", "x", "w.py:KEYS"], {}, "is not callable"),
    ("missing module", ["-o", "x", "-m", "nomodule"], {}, "module nomodule not found"),
    ("missing command", ["-o", "x", "--", "no-such-command-iket"], {}, "not found on PATH"),
    ("previous capture", ["-o", "cap", "w.py:workload"], {}, "holds a previous capture"),
    ("bad pattern", ["-o", "cap-%z", "w.py:workload"], {}, "unknown -o pattern %z"),
    ("unset variable", ["-o", "cap-%q{IKET_NOPE}", "w.py:workload"], {}, "IKET_NOPE is not set"),
    ("parent is a file", ["-o", "w.py/x", "w.py:workload"], {}, "is a file, not a directory"),
    ("name too long", ["-o", "n" * 250, "w.py:workload"], {}, "at most 248 fit"),
    ("working directory", ["-o", ".", "w.py:workload"], {}, "is the working directory"),
    ("its parent", ["-o", "..", "w.py:workload"], {}, "contains the working directory"),
    ("the root", ["-o", "/", "w.py:workload"], {}, "the root directory"),
    ("not a capture", ["-o", "notes", "--clobber", "w.py"], {}, "is not empty and is not an iket capture"),
    ("a symlink", ["-o", "link", "--clobber", "w.py"], {}, "is a symlink"),
    ("a file", ["-o", "w.py", "w.py"], {}, "exists and is not a directory"),
    ("quiet and verbose", ["-q", "-v", "-o", "x", "w.py:workload"], {}, "--quiet and --verbose"),
    ("bad size", ["--max-buffer", "lots", "-o", "x", "w.py:workload"], {}, "is not a size"),
    ("bad cluster", ["--enabled-cluster", "1,2", "w.py"], {}, "is not X,Y,Z"),
    ("cluster and warps", ["--warp-trace", "--enabled-cluster", "0,0,0", "w.py"], {}, "cannot go with"),
    ("nothing kept", ["--postprocess", "none", "w.py"], {}, "would keep nothing of the capture"),
    ("bad env", ["--env", "NOEQUALS", "w.py"], {}, "is not KEY=VALUE"),
    ("nsight", ["-o", "x", "w.py:workload"], {"CUDA_INJECTION64_PATH": "/opt/x.so"}, "already set"),
]


@pytest.mark.parametrize(("args", "env", "message"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_before_anything_runs(harness, args, env, message):
    (harness.work / "notes").mkdir()
    (harness.work / "notes" / "todo.txt").write_text("mine")
    (harness.work / "link").symlink_to(harness.work / "notes")
    before = snapshot(harness.work)
    result = harness.profile(*args, env=env)
    harness.check(result, 2, message)
    assert snapshot(harness.work) == before, "a refused run changes nothing, anywhere"


def test_the_longest_name_that_fits_captures(harness):
    name = "n" * 248
    result = harness.profile("-o", name, "w.py:workload")
    harness.check(result, 0)
    assert manifest.read(harness.work / name)["status"] == "ok"


def test_a_locked_output_directory(harness):
    with outdir.Lock(harness.work / "cap"):
        result = harness.profile("--clobber", "-o", "cap", "w.py:workload")
    harness.check(result, 2, f"another iket command is using {harness.work / 'cap'} (pid {os.getpid()})")


def test_no_run_iket(harness):
    result = harness.run("profile", "--run-iket", "/nonexistent/run-iket", "-o", "x", "w.py:workload")
    harness.check(result, 2, "is not an executable file")


def test_an_old_run_iket(harness):
    site = harness.work / "old-site" / "nvidia_cutlass_dsl_libs_base-4.7.0.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: nvidia-cutlass-dsl-libs-base\nVersion: 4.7.0\n"
    )
    python = harness.work / "python-old"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site.parent} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    tool = harness.work / "run-iket"
    tool.write_text(f"#!{python}\nprint('old run-iket')\n")
    tool.chmod(0o755)
    result = harness.run("profile", "--run-iket", tool, "-o", "x", "w.py:workload")
    harness.check(result, 2, "older than 4.8")


def test_no_instrumented_kernel_is_one_line_and_stdout_stays_clean(harness, real_run_iket):
    """The real run-iket: its AssertionError traceback never reaches the terminal."""
    for quiet in ([], ["-q"]):
        result = harness.run("profile", "--run-iket", real_run_iket, "--clobber", "-o", "cap", *quiet, "w.py")
        harness.check(result, 1, "the workload launched no IKET-instrumented kernel")
        assert result.stdout == "", "a workload's piped stdout gets nothing of run-iket's"
        assert "recommended_max_ts_cnt_per_warp" in (harness.work / "cap.failed" / "iket.log").read_text()


def test_a_workload_that_fails_in_the_tracker_pass(harness):
    (harness.work / "fails.py").write_text("import sys\nprint('bad input')\nsys.exit(3)\n")
    result = harness.profile("--clobber", "-o", "cap", "fails.py")
    harness.check(result, 1, "the workload exited with status 3 in the tracker pass")
    assert "bad input" in result.stdout, "the workload's own output passed through"
    assert manifest.read(harness.work / "cap.failed")["error"]["phase"] == "tracker"


def test_a_trace_buffer_over_the_budget(harness):
    env = {"IKET_DOUBLE_CAPTURE": str(FIXTURES / "multi")}
    result = harness.profile("--clobber", "-o", "cap", "--max-buffer", "1k", "w.py:workload", env=env)
    harness.check(result, 1, "over --max-buffer 1.0 KiB; stopped before the capture pass")


def test_a_capture_pass_that_outgrows_its_buffer(harness):
    (harness.work / "grows.py").write_text(
        "import os, sys\n"
        "if os.environ['IKET_INJECTION_CONFIG'].endswith('iket/iket.config.json'):\n"
        "    print('  what():  IKET trace buffer is too small. Increase the trace buffer size to at least '\n"
        "          '96 bytes.', file=sys.stderr, flush=True)\n"
        "    os.abort()\n"
    )
    result = harness.profile("--clobber", "-o", "cap", "grows.py")
    harness.check(result, 1, "the capture pass recorded more than the tracker pass")


def test_pass_drift_with_strict(harness):
    drifting = harness.work / "drifting"
    shutil.copytree(FIXTURES / "multi", drifting)
    tracker = drifting / "tracker" / "pid_0x222" / "tracker.json"
    data = json.loads(tracker.read_text())
    data["launches"].append(data["launches"][0])
    tracker.write_text(json.dumps(data))
    result = harness.profile(
        "-o", "other", "--strict", "w.py:workload", env={"IKET_DOUBLE_CAPTURE": str(drifting)}
    )
    harness.check(result, 1, "the tracker and capture passes differ")
    assert manifest.read(harness.work / "other")["status"] == "suspect", "published, marked suspect"


def test_a_raw_capture_that_cannot_be_decoded(harness):
    broken = harness.work / "broken"
    shutil.copytree(FIXTURES / "affine", broken)
    data = broken / "iket" / "pid_0x204" / "iket.data.bin"
    data.write_bytes(data.read_bytes()[:8])
    result = harness.profile(
        "--clobber", "-o", "cap", "w.py:workload", env={"IKET_DOUBLE_CAPTURE": str(broken)}
    )
    harness.check(result, 1, "decodes failed: ")
    assert "is truncated" in result.stderr


def test_a_full_disk(harness, small_disk):
    """The previous capture and the new one on a 2 MB disk that is nearly full."""
    shutil.copytree(harness.work / "cap", small_disk / "cap")
    before = {p.name: p.read_bytes() for p in (small_disk / "cap").iterdir()}
    free = shutil.disk_usage(small_disk).free
    (small_disk / "filler").write_bytes(b"\0" * (free - 120_000))
    env = {"IKET_DOUBLE_CAPTURE": str(FIXTURES / "multi")}
    result = harness.profile("--clobber", "-o", small_disk / "cap", "w.py:workload", env=env)
    harness.check(result, 1, f"no space left on the disk holding {small_disk}", folder=small_disk)
    assert "free some space" in result.stderr
    assert {p.name: p.read_bytes() for p in (small_disk / "cap").iterdir()} == before
    kept = small_disk / "cap.failed"
    assert (kept / "iket.log").stat().st_size > 0, "at least the log is kept"


CONFIG_FAULTS = [
    ("escape", '[[jobs]]\nname = "../escape"\ntarget = "w.py:workload"\n', "is not a plain folder name"),
    ("absolute", '[[jobs]]\nname = "/tmp/x"\ntarget = "w.py:workload"\n', "is not a plain folder name"),
    ("hidden", '[[jobs]]\nname = ".x"\ntarget = "w.py:workload"\n', "is not a plain folder name"),
    ("unknown key", 'colour = "red"\n[[jobs]]\nname = "a"\ntarget = "w.py"\n', "colour: unknown key"),
    ("no jobs", 'output = "x"\n', "no job defined"),
    ("bad toml", "[[jobs]\n", "not valid TOML"),
]


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in CONFIG_FAULTS], ids=[c[0] for c in CONFIG_FAULTS]
)
def test_iket_run_configuration_errors(harness, text, message):
    (harness.work / "iket.toml").write_text(text)
    result = harness.run("run")
    harness.check(result, 2, message)
    assert sorted(p.name for p in harness.work.iterdir()) == sorted(
        ["cap", "iket.toml", "slow.py", "w.py"]
    ), "nothing was written, inside the root or outside it"
