"""A CLI that died with no message, or with a traceback (issue 31: D1, D9, D10, D23), each
through the real CLI: a decoder that aborts, damaged inputs of every reader, closed and full
standard streams, encodings that cannot hold a name, and ``PYTHONWARNINGS=error``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iket_cli.model import manifest

from conftest import FIXTURES, snapshot, with_path

TRACE = "iket_pid_0x204.trace.json"
DEEP = "[" * 100_000 + "]" * 100_000


def kept_raw(where: Path, fixture: str = "affine") -> Path:
    """A folder as ``run-iket --keep`` leaves it: the raw capture, no artifact."""
    shutil.copytree(FIXTURES / fixture, where)
    for path in where.iterdir():
        if path.name.startswith("iket_pid_") or path.name == "manifest.json":
            path.unlink()
    return where


def test_a_decoder_that_aborts_is_a_message_and_the_raw_capture_stays(harness):
    """D1: ``meta.version = 9`` in the raw manifest makes NVIDIA's decoder abort its process
    (SIGABRT); it did so inside the CLI: exit 134, no message, lock left."""
    raw = kept_raw(harness.work / "kept")
    record = raw / "iket" / "pid_0x204" / "iket.data.json"
    data = json.loads(record.read_text())
    data["meta"]["version"] = 9
    record.write_text(json.dumps(data))
    before = snapshot(raw)
    result = harness.run("postprocess", "kept", "--format", "json")
    harness.check(result, 1, "NVIDIA's decoder crashed (signal 6, SIGABRT)")
    assert "it is kept as it is" in result.stderr
    assert {k: v for k, v in snapshot(raw).items() if k != "manifest.json"} == before


def test_a_decoder_abort_in_a_capture_keeps_the_raw_capture_as_evidence(harness):
    broken = harness.work / "broken"
    shutil.copytree(FIXTURES / "affine", broken)
    record = broken / "iket" / "pid_0x204" / "iket.data.json"
    data = json.loads(record.read_text())
    data["meta"]["version"] = 9
    record.write_text(json.dumps(data))
    result = harness.profile(
        "--clobber", "-o", "cap", "w.py:workload", env={"IKET_DOUBLE_CAPTURE": str(broken)}
    )
    harness.check(result, 1, "crashed (signal 6, SIGABRT)")
    failed = manifest.read(harness.work / "cap.failed")
    assert failed["status"] == "failed" and failed["error"]["type"] == "DecodeError"
    assert (harness.work / "cap.failed" / "iket" / "pid_0x204" / "iket.data.bin").is_file()


def _edited_capture(harness, name: str, manifest_edit=None, trace_edit=None) -> str:
    folder = harness.work / name
    shutil.copytree(harness.work / "cap", folder)
    if manifest_edit is not None:
        record = json.loads((folder / "manifest.json").read_text())
        manifest_edit(record)
        (folder / "manifest.json").write_text(json.dumps(record))
    if trace_edit is not None:
        doc = json.loads((folder / TRACE).read_text())
        trace_edit(doc)
        (folder / TRACE).write_text(json.dumps(doc))
    return name


def _deep_trace(harness) -> str:
    (harness.work / "deep").mkdir()
    (harness.work / "deep" / TRACE).write_text(DEEP)
    return "deep"


def _deep_object_trace(harness) -> str:
    (harness.work / "deepobj").mkdir()
    (harness.work / "deepobj" / TRACE).write_text('{"a":' + DEEP + "}")
    return "deepobj"


def _deep_manifest(harness) -> str:
    folder = harness.work / "deepm"
    shutil.copytree(harness.work / "cap", folder)
    (folder / "manifest.json").write_text(DEEP)
    return "deepm"


def _deep_roles(harness) -> str:
    folder = harness.work / "deepr"
    shutil.copytree(harness.work / "cap", folder)
    (folder / "kernel_symbols.json").write_text(DEEP)
    return "deepr"


def _zero_trace(harness) -> str:
    (harness.work / "zeros").mkdir()
    with open(harness.work / "zeros" / TRACE, "wb") as handle:
        handle.truncate(3 << 30)  # 3 GB of zeros, sparse: nothing is read whole
    return "zeros"


#: (id, how to make the input, the command's words after the input, the error's words)
DAMAGED = [
    ("deep trace show", _deep_trace, ["show"], "is a JSON array, not an object"),
    ("deep trace lint", _deep_trace, ["lint"], "is a JSON array, not an object"),
    ("deep trace report", _deep_trace, ["report", "-o", "r.html"], "is a JSON array, not an object"),
    ("deep object show", _deep_object_trace, ["show"], "nested too deeply"),
    ("deep object diff", _deep_object_trace, ["diff", "cap"], "nested too deeply"),
    ("deep object export", _deep_object_trace, ["export", "-o", "ex"], "nested too deeply"),
    ("deep object sql", _deep_object_trace, ["sql", "SELECT 1"], "nested too deeply"),
    ("deep manifest show", _deep_manifest, ["show"], "nested too deeply"),
    ("deep manifest merge", _deep_manifest, ["merge-into"], "nested too deeply"),
    ("deep roles", _deep_roles, ["show", "--by", "role"], "nested too deeply"),
    (
        "artifacts null",
        lambda h: _edited_capture(h, "anull", lambda m: m["processes"][0].update(artifacts=None)),
        ["show"],
        "artifacts should be dict",
    ),
    (
        "a repeat that is a number",
        lambda h: _edited_capture(
            h,
            "rep",
            lambda m: m.update(repeats=[{"index": 1, "dir": "", "status": "ok", "processes": []}, 5]),
        ),
        ["show"],
        "repeats[1] is not an object",
    ),
    (
        "pid 2**80",
        lambda h: _edited_capture(h, "pid80", lambda m: m["processes"][0].update(pid=2**80)),
        ["show"],
        "is not a process id",
    ),
    (
        "gridDimX 2**40",
        lambda h: _edited_capture(h, "grid", trace_edit=lambda d: d["launches"][0].update(gridDimX=2**40)),
        ["export", "-o", "ex"],
        "grid or block",
    ),
    (
        "smId -2**63-1",
        lambda h: _edited_capture(
            h, "sm", trace_edit=lambda d: d["locationTable"][0].update(smId=-(2**63) - 1)
        ),
        ["report", "-o", "r.html"],
        "locationTable[0] is not a warp location",
    ),
    (
        "locIdx 1e9",
        lambda h: _edited_capture(
            h, "loc", trace_edit=lambda d: d["launches"][0]["markers"][0].update(locIdx=10**9)
        ),
        ["report", "-o", "r.html"],
        "locIdx 1000000000, outside its locationTable",
    ),
    ("a 3 GB trace of zeros", _zero_trace, ["show"], "does not start with a JSON object"),
]


@pytest.mark.parametrize(("make", "words", "message"), [d[1:] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_damaged_inputs_are_one_line_in_bounded_memory(harness, make, words, message):
    """D9: exit 2 with one line, never a traceback, under a 2 GB address-space limit."""
    name = make(harness)
    if words[0] == "merge-into":
        args = ["merge", "out", name, "cap"]
    elif words[0] == "sql":
        args = ["sql", name, *words[1:]]
    elif words[0] == "diff":
        args = ["diff", name, *words[1:]]
    else:
        args = [words[0], name, *words[1:]]
    harness.check(_limited(harness, args), 2, message)


def _limited(harness, args, limit: int = 2 << 30, env: dict | None = None):
    """The CLI under ``RLIMIT_AS``: a reader that allocates without bound fails, and shows."""
    from conftest import Result

    def cap_memory():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cmd = harness.command(args)
    done = subprocess.run(
        cmd,
        cwd=harness.work,
        env=harness.env(env),
        capture_output=True,
        text=True,
        errors="replace",
        stdin=subprocess.DEVNULL,
        preexec_fn=cap_memory,
        timeout=120,
    )
    return Result(done.returncode, done.stdout, done.stderr, cmd)


def test_a_deep_configuration_is_one_line(harness):
    (harness.work / "iket.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    harness.check(harness.run("run"), 2, "nested too deeply")


def test_a_damaged_perfetto_trace_in_merge_timeline(harness):
    other = _edited_capture(harness, "other", lambda m: m.update(started_at="2020-01-01T00:00:00.000+00:00"))
    (harness.work / other / "iket_pid_0x204.pftrace").write_bytes(b"\x0a\xff\xff\xff\xff\x0fgarbage")
    result = harness.run("merge", "out", "cap", other, "--timeline")
    harness.check(result, 2, "a Perfetto trace of the inputs is not readable")
    assert not (harness.work / "out").exists()


def test_a_raw_folder_that_is_not_a_pid(harness):
    raw = kept_raw(harness.work / "kept", "multi")
    os.rename(raw / "iket" / "pid_0x23f", raw / "iket" / "pid_0x23f<x")
    harness.check(harness.run("postprocess", "kept"), 2, "holds no raw capture")


NAMES = [
    ("markup", "[/bad]", "[/bad]"),
    ("style markup", "[bold red]x[/]", "[bold red]x[/]"),
    ("emoji code", ":x: done", ":x: done"),
    ("escape sequence", "\x1b]0;owned\x07\x1b[2J", "\\x1b]0;owned\\x07\\x1b[2J"),
    ("lone surrogate", "\ud800range", "?range"),
]


@pytest.mark.parametrize(("name", "expected"), [n[1:] for n in NAMES], ids=[n[0] for n in NAMES])
@pytest.mark.parametrize("command", [["show"], ["show", "--timeline"], ["diff", "cap"], ["lint"]])
def test_names_are_shown_as_they_are_never_interpreted(harness, name, expected, command):
    """D6, D9, D20: a range named so is shown literally: never rich markup, an emoji, an escape
    sequence on the terminal, nor a traceback for text UTF-8 cannot hold."""
    folder = _edited_capture(harness, "named", trace_edit=lambda d: d["stringTable"].__setitem__(0, name))
    args = [command[0], folder, *command[1:]]
    result = harness.run(*args)
    assert result.code in (0, 1), result  # lint may find the name too long
    assert "Traceback" not in result.stderr + result.stdout, result
    everything = result.stdout + result.stderr
    assert "\x1b" not in everything and "\x07" not in everything and "❌" not in everything, result
    if command != ["lint"]:
        assert expected in everything, result


def test_a_report_of_a_name_utf8_cannot_hold(harness):
    folder = _edited_capture(harness, "surr", trace_edit=lambda d: d["stringTable"].__setitem__(0, "\ud800x"))
    result = harness.run("report", folder, "-o", "r.html")
    harness.check(result, 0, previous=False)
    assert "?x" in (harness.work / "r.html").read_text()


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize(
    "command", [["show", "cap"], ["diff", "cap", "cap"], ["show", "cap", "--format", "csv"]]
)
def test_an_encoding_that_cannot_hold_the_output(harness, encoding, command):
    """D9: ``PYTHONIOENCODING=ascii`` or latin-1: what it cannot hold is escaped."""
    done = subprocess.run(
        harness.command(command),
        cwd=harness.work,
        env=harness.env({"PYTHONIOENCODING": encoding}),
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    out, err = done.stdout.decode(encoding), done.stderr.decode(encoding)
    assert done.returncode == 0 and "Traceback" not in out + err, err
    assert "affine" in out


def test_a_non_utf8_output_name_and_workload_argument(harness):
    """D9: bytes that are not UTF-8 in ``-o`` (refused: run-iket writes paths as UTF-8 text) and
    in the workload's arguments (passed on as they are)."""
    (harness.work / "args.py").write_text(
        "import sys\nprint('args', [a.encode('utf-8', 'surrogateescape') for a in sys.argv[1:]])\n"
    )

    def profile(name: str) -> subprocess.CompletedProcess:
        cmd = harness.command(
            ["profile", "--run-iket", harness.double, "-o", name, "args.py", os.fsdecode(b"\xfe")]
        )
        return subprocess.run(
            cmd, cwd=harness.work, env=harness.env(), capture_output=True, stdin=subprocess.DEVNULL
        )

    refused = profile(os.fsdecode(b"cap-\xff"))
    err = refused.stderr.decode("utf-8", "replace")
    assert refused.returncode == 2 and "Traceback" not in err, err
    assert err.count("iket: error:") == 1 and "is not a UTF-8 path" in err, err
    done = profile("cap-args")
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, err
    assert "Traceback" not in err
    assert b"args [b'\\xfe']" in done.stdout, done.stdout
    assert manifest.read(harness.work / "cap-args")["status"] == "ok"


CHATTY = "def workload():\n    for i in range(20000):\n        print('line', i, 'of chatty output')\n"


@pytest.mark.parametrize("stdout", ["closed", "full"])
def test_a_closed_or_full_stdout_never_blocks_the_workload(harness, stdout):
    """D10: with stdout closed (``>&-``) or on a full device, the echo of ~500 KB of the
    workload's output neither dies with a traceback nor blocks the workload."""
    (harness.work / "chatty.py").write_text(CHATTY)
    cmd = harness.command(["profile", "--run-iket", harness.double, "-o", "c", "chatty.py:workload"])
    target = open("/dev/full", "w") if stdout == "full" else None  # noqa: SIM115
    try:
        done = subprocess.run(
            cmd,
            cwd=harness.work,
            env=harness.env(),
            stdin=subprocess.DEVNULL,
            stdout=target if target is not None else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            pass_fds=(),
            preexec_fn=(lambda: os.close(1)) if target is None else None,
        )
    finally:
        if target is not None:
            target.close()
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert manifest.read(harness.work / "c")["status"] == "ok"
    assert "line 19999 of chatty output" in (harness.work / "c" / "iket.log").read_text()
    if stdout == "full":
        assert "the workload's output could not be shown" in done.stderr


def test_stdout_full_for_a_command_whose_output_is_data(harness):
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            harness.command(["show", "cap", "--format", "json"]),
            cwd=harness.work,
            env=harness.env(),
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "could not write to standard output: No space left on device" in done.stderr


def test_a_reader_that_leaves_early_is_no_error(harness):
    """``iket show | head -1``: the reader had what it wanted."""
    proc = subprocess.Popen(
        harness.command(["show", "cap"]),
        cwd=harness.work,
        env=harness.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.read(10)
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "error" not in err, err


def test_stderr_closed(harness):
    """D23: ``2>&-`` exited 1 with nothing said; the capture succeeds."""
    done = subprocess.run(
        harness.command(["profile", "--run-iket", harness.double, "-o", "c", "w.py:workload"]),
        cwd=harness.work,
        env=harness.env(),
        stdin=subprocess.DEVNULL,
        capture_output=False,
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: os.close(2),
        timeout=60,
    )
    assert done.returncode == 0
    assert manifest.read(harness.work / "c")["status"] == "ok"


def test_pythonwarnings_error_is_the_workload_s_not_run_iket_s(harness):
    """D23: ``PYTHONWARNINGS=error`` broke every capture in run-iket's set-up; the workload
    still gets it (a DeprecationWarning it raises is its error)."""
    result = harness.profile("-o", "c", "w.py:workload", env={"PYTHONWARNINGS": "error"})
    harness.check(result, 0)
    (harness.work / "warns.py").write_text(
        "import os, warnings\n"
        "def workload():\n"
        "    print('sees', os.environ.get('PYTHONWARNINGS'))\n"
        "    warnings.warn('old', DeprecationWarning)\n"
    )
    failing = harness.profile("-o", "d", "warns.py:workload", env={"PYTHONWARNINGS": "error"})
    assert failing.code == 1 and "in the tracker pass" in failing.stderr, failing  # the workload's own error
    assert "DeprecationWarning: old" in (harness.work / "d.failed" / "iket.log").read_text()
    passing = harness.profile("-o", "e", "warns.py:workload")
    harness.check(passing, 0)
    assert "sees None" in passing.stdout
    for command in (["show", "c"], ["report", "c", "-o", "r.html"], ["export", "c", "-o", "ex"]):
        harness.check(harness.run(*command, env={"PYTHONWARNINGS": "error"}), 0)


#: In decode workers only (a worker process, or a fork of the CLI): NVIDIA's decoder killed by
#: SIGKILL as it exports, as the OOM killer would.
OOM_KILLED = (
    "import os, signal, sys\n"
    "START = os.getpid()\n"
    "def _die(*args):\n"
    "    if os.getpid() != START or 'worker_main' in ' '.join(sys.argv):\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "    raise RuntimeError('the CLI itself decoded: the test expects a worker')\n"
    "class _Kill:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name != 'iket':\n"
    "            return None\n"
    "        sys.meta_path.remove(self)\n"
    "        import importlib.util\n"
    "        spec = importlib.util.find_spec(name)\n"
    "        run = spec.loader.exec_module\n"
    "        def exec_module(module):\n"
    "            run(module)\n"
    "            module.RawCaptureDecoder.export_decoded_json = _die\n"
    "        spec.loader.exec_module = exec_module\n"
    "        return spec\n"
    "sys.meta_path.insert(0, _Kill())\n"
)


def test_a_decode_worker_killed_by_sigkill_is_said_so(harness):
    """Issue 50, R3-13: a worker killed by signal 9 (the OOM killer) is not a corrupt capture."""
    kept_raw(harness.work / "kept")
    hook = harness.work / "oom"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(OOM_KILLED)
    result = harness.run("postprocess", "kept", "--format", "json", env=with_path(hook))
    harness.check(result, 1, "a decode worker was killed (signal 9, SIGKILL: out of memory?)")
    assert "corrupt" not in result.stderr and "--jobs 1" in result.stderr, result


def _big_damaged(where: Path) -> Path:
    """keep256's raw capture (split by launch and CTA chunk: 11.8 MB) that makes NVIDIA's
    decoder abort on every part (``meta.version = 9``)."""
    import tarfile

    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(where, filter="data")
    raw = where / "keep256" / "iket" / "pid_0x238"
    record = raw / "iket.data.json"
    data = json.loads(record.read_text())
    data["meta"]["version"] = 9
    record.write_text(json.dumps(data))
    return raw


@pytest.mark.parametrize("fmt", ["json", "perfetto", "all"])
def test_a_split_decode_that_crashes_leaves_no_part(harness, fmt):
    """Issue 50, D1: after a decoder crash in a split export, no ``.part*``/``.pfpart*`` input
    is left beside the raw capture."""
    raw = _big_damaged(harness.work)
    result = harness.run("postprocess", raw.parent.parent, "--format", fmt, timeout=300)
    harness.check(result, 1, "NVIDIA's decoder crashed (signal 6, SIGABRT)")
    assert sorted(p.name for p in raw.iterdir()) == ["iket.data.bin", "iket.data.json", "iket.injection.log"]


def test_a_capture_whose_split_decode_crashes_keeps_clean_evidence(harness):
    """D1 in a capture: DIR.failed/ holds the raw capture and no split input, and the error
    names the raw file where it now is (the staging folder is gone)."""
    raw = _big_damaged(harness.work / "source")
    recorded = harness.work / "recorded"
    shutil.copytree(FIXTURES / "affine" / "tracker", recorded / "tracker")
    shutil.copytree(raw, recorded / "iket" / "pid_0x204")
    shutil.copy(raw.parent / "iket.config.json", recorded / "iket" / "iket.config.json")
    result = harness.profile("-o", "big", "w.py:workload", env={"IKET_DOUBLE_CAPTURE": str(recorded)})
    harness.check(result, 1, "NVIDIA's decoder crashed", previous=False)
    kept = harness.work / "big.failed" / "iket" / "pid_0x204"
    assert sorted(p.name for p in kept.iterdir()) == ["iket.data.bin", "iket.data.json", "iket.injection.log"]
    error = next(line for line in result.stderr.splitlines() if line.startswith("iket: error:"))
    assert ".iket-staging-" not in error and str(kept / "iket.data.json") in error, result
