"""``iket doctor --gpu`` under faults, through the real CLI (issue 50: R3-5 signals and kill -9
mid-probe, R3-15 its cache, R3-8 its table on a terminal).

An ``nvidia-smi`` that answers as an H200's makes the probes run here, under the real run-iket;
a ``sitecustomize`` on the probes' path makes each probe wait, so that a signal finds them
running.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from iket_cli.capture import probes
from iket_cli.system import machine

from conftest import with_path

#: Makes every probe sleep in the pass that runs it (the CLI itself is left alone).
SLOW_PROBE = "import sys, time\nif sys.argv[0].endswith('probe.py'):\n    time.sleep(120)\n"


@pytest.fixture
def gpu_env(tmp_path) -> dict:
    """A fake H200 ``nvidia-smi``, a private cache and scratch folder."""
    folder = tmp_path / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, NVIDIA H200, 580.159.04'\n")
    smi.chmod(0o755)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return {
        "PATH": f"{folder}:{os.environ['PATH']}",
        "IKET_CACHE_DIR": str(tmp_path / "cache"),
        "TMPDIR": str(scratch),
    }


def slow(gpu_env, tmp_path) -> dict:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_PROBE)
    return {**gpu_env, **with_path(hook)}


def probing(harness, started, seconds: float = 60) -> None:
    """Wait until a probe's workload is running."""
    from iket_cli.system import tree

    from conftest import cmdline

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(b"probe.py" in cmdline(pid) for pid in tree._pids()):
            return
        time.sleep(0.1)
    raise AssertionError(f"no probe ran:\n{''.join(started.err)}")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["int", "term", "hup"])
def test_a_signal_mid_probe_stops_every_probe(harness, gpu_env, tmp_path, signum):
    env = slow(gpu_env, tmp_path)
    started = harness.start("doctor", "--gpu", "--refresh", env=env)
    probing(harness, started)
    harness.terminal_signal(started, signum)
    result = started.finish(seconds=60)
    name = signal.Signals(signum).name
    harness.check(result, 128 + signum, f"interrupted by {name} while probing the GPU")
    assert list(Path(env["TMPDIR"]).glob("iket-probes-*")) == [], "the probes' scratch folder is left"


def test_kill_9_mid_probe_leaves_the_watchdog_to_clean_up(harness, gpu_env, tmp_path):
    env = slow(gpu_env, tmp_path)
    started = harness.start("doctor", "--gpu", "--refresh", env=env)
    probing(harness, started)
    started.proc.kill()
    started.finish(seconds=60)
    harness.assert_nothing_left()
    deadline = time.monotonic() + 10
    while list(Path(env["TMPDIR"]).glob("iket-probes-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(Path(env["TMPDIR"]).glob("iket-probes-*")) == [], "the probes' scratch folder is left"


def _stack(gpu_env: dict, name: str = "NVIDIA H200") -> dict:
    from iket_cli.system import toolchain

    tool = toolchain.find(None, {**os.environ, **gpu_env})
    return probes.stack(tool.version, [{"index": "0", "name": name, "driver": "580.159.04"}])


def _write_cache(gpu_env: dict, of: dict, table) -> Path:
    path = probes.cache_file(gpu_env, of)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table if isinstance(table, str) else json.dumps(table))
    return path


GOOD = {"name": "fp32 GEMM", "verdict": "survives", "detail": "ran to its end under run-iket", "seconds": 1.0}


@pytest.mark.parametrize(
    "table",
    [
        "[]",
        "null",
        '{"probes": 5, "probed_at": "x"}',
        {"probes": [5], "probed_at": "x"},
        {"probes": [{"name": 1}], "probed_at": "x"},
        {"probes": [{**GOOD, "verdict": "maybe"}], "probed_at": "x"},
        {"probes": [{**GOOD, "seconds": "1"}], "probed_at": "x"},
        {"probes": [GOOD], "probed_at": 5},
        "{" * 100_000,
        json.dumps({"probes": [{**GOOD, "detail": "\udcff"}], "probed_at": "x"}),
    ],
    ids=[
        "list",
        "null",
        "probes 5",
        "probe 5",
        "name 1",
        "verdict",
        "seconds",
        "probed_at",
        "deep",
        "surrogate",
    ],
)
def test_a_cache_of_another_shape_is_probed_again(harness, gpu_env, table):
    of = _stack(gpu_env)
    if isinstance(table, dict):  # this stack's table, with one thing of another shape
        table = {"stack": of, **table}
    elif table.startswith('{"probes"'):
        table = json.dumps({"stack": of, **json.loads(table)})
    _write_cache(gpu_env, of, table)
    result = harness.run("doctor", "--gpu", "--json", env=gpu_env, timeout=300)
    assert result.code in (0, 1) and "Traceback" not in result.stderr, result
    assert json.loads(result.stdout)["gpu"]["cached"] is False


def test_the_cache_is_keyed_by_the_gpu_model(harness, gpu_env):
    h200, h100 = _stack(gpu_env), _stack(gpu_env, "NVIDIA H100 80GB HBM3")
    assert probes.cache_file(gpu_env, h200) != probes.cache_file(gpu_env, h100)
    assert {"gpus", "dsl"} <= set(h200) and h200["gpus"] == ["NVIDIA H200"]
    table = {"stack": h200, "probed_at": "2026-12-06T00:00:00+00:00", "probes": [GOOD]}
    _write_cache(gpu_env, h200, table)
    result = harness.run("doctor", "--gpu", "--json", env=gpu_env, timeout=300)
    assert json.loads(result.stdout)["gpu"]["cached"] is True, result
    table["stack"] = h100  # a table written for another GPU under this one's name: not used
    _write_cache(gpu_env, h200, table)
    again = harness.run("doctor", "--gpu", "--json", env=gpu_env, timeout=300)
    assert json.loads(again.stdout)["gpu"]["cached"] is False, again


def test_a_failed_probe_is_shown_and_not_cached(harness, gpu_env):
    """On this machine the probes that run fail (no CUDA): a failure of the environment, which
    the next run probes again rather than quote as the stack's verdict."""
    first = harness.run("doctor", "--gpu", "--json", env=gpu_env, timeout=300)
    table = json.loads(first.stdout)["gpu"]
    verdicts = {p["verdict"] for p in table["probes"]}
    if verdicts <= set(probes.LASTING):
        pytest.skip("every probe ended with a lasting verdict here")
    assert not probes.cache_file(gpu_env, table["stack"]).exists()
    again = harness.run("doctor", "--gpu", "--json", env=gpu_env, timeout=300)
    assert json.loads(again.stdout)["gpu"]["cached"] is False


def test_json_without_a_gpu_still_prints_the_checks(harness, tmp_path):
    empty = tmp_path / "nogpu"
    empty.mkdir()
    if machine.query_gpus():
        pytest.skip("this machine has a GPU")
    result = harness.run(
        "doctor", "--gpu", "--json", env={"PATH": f"{empty}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    )
    harness.check(result, 1, "iket doctor --gpu needs an NVIDIA GPU")
    said = json.loads(result.stdout)
    assert said["gpu"] is None and "needs an NVIDIA GPU" in said["gpu_error"] and said["checks"]


def test_the_cached_table_on_a_terminal_spells_escapes_out(harness, gpu_env):
    from faults.test_annotation_faults import _dangerous, _on_terminal

    of = _stack(gpu_env)
    evil = {**GOOD, "detail": "\x1b]0;owned\x07\x1b[2J"}
    _write_cache(gpu_env, of, {"stack": of, "probed_at": "2026-12-06\x1b[2J", "probes": [evil]})
    harness_env = harness.env
    harness.env = lambda extra=None: harness_env({**gpu_env, **(extra or {})})
    shown = _on_terminal(harness, ["doctor", "--gpu"])
    assert "(cached" in shown and not _dangerous(shown), repr(shown)


DAEMON_LIBRARY = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* A session library whose load leaves a daemon holding the loader's pipes (its pid written to
   $DAEMON_PID), and that says an escape sequence on stderr (what a terminal would act on). */
__attribute__((constructor)) static void start_daemon(void) {
    fprintf(stderr, "\x1b[2J\x1b[31mlibrary says hello\n");
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) { sleep(60); _exit(0); }
    FILE *f = fopen(getenv("DAEMON_PID"), "w");
    if (f) { fprintf(f, "%d", (int)pid); fclose(f); }
}
"""


def test_a_session_library_that_leaves_a_daemon_does_not_hold_doctor_and_its_words_are_spelled(tmp_path):
    """The probe used to wait for the daemon (kill, then an unbounded communicate: 129 s), and
    printed the library's path and stderr raw."""
    import shutil
    import subprocess

    from conftest import run_iket

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "daemon.c"
    source.write_text(DAEMON_LIBRARY)
    library = tmp_path / "lib\x1b[31mdaemon.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    start = time.monotonic()
    env = {"IKET_CLI_SESSION_LIBRARY": str(library), "DAEMON_PID": str(tmp_path / "daemon.pid")}
    done = run_iket("doctor", cwd=tmp_path, env=env, timeout=100)
    took = time.monotonic() - start
    assert took < 30, f"doctor took {took:.0f} s"
    (line,) = [line for line in done.stdout.splitlines() if "in-process session" in line]
    assert "\x1b" not in done.stdout and "\\x1b[31m" in line, line
    daemon = int((tmp_path / "daemon.pid").read_text())
    time.sleep(0.5)
    stat = Path(f"/proc/{daemon}/stat")
    gone = not stat.exists() or stat.read_text().split()[2] == "Z"
    assert gone, "the daemon left in the probe's group is stopped with it"
