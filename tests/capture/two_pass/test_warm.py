"""The warm standby: which imports it makes, and a pass handed over to it end to end.

End to end runs use the run-iket double (the passes are real processes with run-iket's
injection variables; only the GPU's raw output is replayed) and numpy as the heavy
import: the workload notes whether numpy was already imported when its module loaded,
which is only true in the standby's worker.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iket_cli.capture.targets import Target
from iket_cli.capture.two_pass import warm

from conftest import all_gone, replay, run_iket, start_iket

WORKLOAD = """
import os, sys, time
WARM = "numpy" in sys.modules  # only the standby's worker has it before this line
import numpy


def workload():
    config = os.environ.get("IKET_INJECTION_CONFIG", "")
    phase = "tracker" if "tracker" in config else "capture"
    record = {
        "phase": phase,
        "warm": WARM,
        "pid": os.getpid(),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "injection": bool(os.environ.get("CUDA_INJECTION64_PATH")),
        "config": config,
        "user_env": os.environ.get("USER_VAR"),
        "warm_socket_seen": "IKET_WARM_SOCKET" in os.environ,
    }
    print("RECORD " + __import__("json").dumps(record), flush=True)
    if WARM and os.environ.get("WARM_EXIT"):
        sys.exit(int(os.environ["WARM_EXIT"]))
    if WARM and os.environ.get("WARM_SIGNAL"):
        os.kill(os.getpid(), int(os.environ["WARM_SIGNAL"]))
    if WARM and os.environ.get("WARM_SLEEP"):
        open("worker.pid", "w").write(str(os.getpid()))
        time.sleep(float(os.environ["WARM_SLEEP"]))
    if phase == "tracker":
        time.sleep(2)  # the standby is ready well before the capture pass
    launched = os.environ.get("IKET_DOUBLE_LAUNCHED")
    if launched and phase == "capture":
        open(os.path.join(launched, str(os.getpid())), "w").close()
"""


def records(text: str) -> list[dict]:
    return [json.loads(line.split("RECORD ", 1)[1]) for line in text.splitlines() if "RECORD " in line]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "wl.py").write_text(WORKLOAD)
    (tmp_path / "launched").mkdir()
    return tmp_path


def capture(workdir: Path, double: Path, *extra: str, env: dict | None = None):
    full = {
        **replay("affine"),
        "IKET_DOUBLE_LAUNCHED": str(workdir / "launched"),
        "USER_VAR": "u",
        **(env or {}),
    }
    return run_iket(
        "profile", "--run-iket", double, "-o", "cap", *extra, "wl.py:workload", cwd=workdir, env=full
    )


def test_one_pass_is_handed_to_the_standby(workdir, double):
    result = capture(workdir, double)
    assert result.code == 0, result
    tracker, captured = records(result.stdout + result.stderr)
    assert (tracker["phase"], captured["phase"]) == ("tracker", "capture")
    assert [tracker["warm"], captured["warm"]].count(True) == 1, "exactly one pass ran in the worker"
    for key in ("argv", "cwd", "injection", "user_env"):
        assert tracker[key] == captured[key], key
    assert tracker["injection"] and "iket.config.json" in captured["config"]
    assert not tracker["warm_socket_seen"] and not captured["warm_socket_seen"], "the shim hides it"
    record = json.loads((workdir / "cap" / "manifest.json").read_text())
    assert record["warm"] == {"modules": ["numpy"], "used": True}
    (process,) = record["processes"]
    assert process["pid"] == captured["pid"], "the capture is named after the process that ran"
    labels = process["labels"]
    assert labels["argv"][-3:] == ["call", str(workdir / "wl.py"), "workload"], "labelled as the pass"
    assert "iket-warm: serving" in (workdir / "cap" / "warm.log").read_text()


def test_no_warm_runs_both_passes_cold(workdir, double):
    result = capture(workdir, double, "--no-warm")
    assert result.code == 0, result
    assert [r["warm"] for r in records(result.stdout + result.stderr)] == [False, False]
    record = json.loads((workdir / "cap" / "manifest.json").read_text())
    assert record["warm"] is None and not (workdir / "cap" / "warm.log").exists()


def test_the_workers_exit_status_is_the_passes(workdir, double):
    result = capture(workdir, double, env={"WARM_EXIT": "3"})
    assert result.code == 1, result
    assert "the workload exited with status 3 in the" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_worker_killed_by_a_signal_fails_the_pass(workdir, double):
    result = capture(workdir, double, env={"WARM_SIGNAL": str(int(signal.SIGTERM))})
    assert result.code == 1, result
    assert "iket: error:" in result.stderr and "Traceback" not in result.stderr


def test_timeout_kills_the_worker_too(workdir, double):
    start = time.monotonic()
    result = capture(workdir, double, "--timeout", "6", env={"WARM_SLEEP": "60"})
    assert result.code == 124, result
    assert time.monotonic() - start < 30
    worker = int((workdir / "worker.pid").read_text())
    assert all_gone([worker])
    assert not list(workdir.glob(".cap.iket-*")), "staging removed"


def test_ctrl_c_stops_the_worker(workdir, double):
    env = {**os.environ, **replay("affine"), "WARM_SLEEP": "60"}
    proc = start_iket("profile", "--run-iket", double, "-o", "cap", "wl.py:workload", cwd=workdir, env=env)
    deadline = time.monotonic() + 30
    while not (workdir / "worker.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = int((workdir / "worker.pid").read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert all_gone([worker])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch\nimport numpy as np\n", ["torch", "numpy"]),
        (
            "import torch.nn as nn\nimport os\nfrom tvm_tirx.script import tirx as T\n",
            ["torch.nn"],  # TIRx initialises CUDA at import: never early
        ),
        ("try:\n    import torch\nexcept ImportError:\n    torch = None\n", ["torch"]),
        ("if True:\n    from torch import nn\n", ["torch"]),
        ("def f():\n    import torch\n", []),  # imported when called: in the worker anyway
        ("import cutlass\nimport cutlass.cute as cute\n", []),  # reads run-iket's variables at import
        ("from . import torch\n", []),  # the user's own package
        ("this is not python", []),
    ],
)
def test_modules_for_reads_top_level_imports(tmp_path, source, expected):
    (tmp_path / "wl.py").write_text(source)
    target = Target("function", f"{tmp_path / 'wl.py'}:workload")
    assert warm.modules_for(target, tmp_path) == expected


def test_modules_for_finds_a_dotted_module_without_importing_it(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('never imported')\n")
    (package / "kernels.py").write_text("import torch\n")
    assert warm.modules_for(Target("function", "pkg.kernels:run"), tmp_path) == ["torch"]
    assert warm.modules_for(Target("script", "pkg/kernels.py"), tmp_path) == ["torch"]
    assert (
        warm.standby_for(
            Target("function", "pkg.kernels:run"), tmp_path, tmp_path / "w.log", "0", enabled=False
        )
        is None
    )


def test_the_shim_runs_the_call_itself_when_no_standby_listens(tmp_path):
    (tmp_path / "wl.py").write_text("import sys\ndef f():\n    print('ran here', flush=True)\n")
    shim = Path(warm.__file__).parent.with_name("_shim.py")
    env = {**os.environ, warm.WARM_ENV: str(tmp_path / "nobody-listens")}
    out = subprocess.run(
        [sys.executable, str(shim), "call", str(tmp_path / "wl.py"), "f"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (out.returncode, out.stdout) == (0, "ran here\n"), out.stderr


def test_the_standby_does_not_serve_once_cuda_is_initialised(tmp_path):
    """After an import that called cuInit a forked worker could not use CUDA: no socket.

    The standby runs in a subprocess with the probe answering yes; were it to listen, it
    would wait for a pass and the timeout would fail the test.
    """
    script = (
        "import runpy, sys\n"
        f"shim = runpy.run_path({str(Path(warm.__file__).parent.with_name('_shim.py'))!r})\n"
        "shim['serve'].__globals__['cuda_initialized'] = lambda: True\n"
        "sys.exit(shim['serve'](sys.argv[1], ['json']))\n"
    )
    socket_path = tmp_path / "s"
    done = subprocess.run(
        [sys.executable, "-c", script, str(socket_path)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert "importing json initialised CUDA; not serving" in done.stderr
    assert not socket_path.exists(), "never listened"


def test_the_cuda_probe_says_no_on_a_machine_without_a_driver():
    import ctypes.util

    from iket_cli.capture import _shim

    if ctypes.util.find_library("cuda"):
        pytest.skip("a CUDA driver is installed here: the GPU checks cover the probe")
    assert _shim.cuda_initialized() is False


SCRIPT = (
    WORKLOAD
    + """
if __name__ == "__main__":
    seen = {"name": __name__, "argv": sys.argv, "path0": sys.path[0]}
    print("MAIN " + __import__("json").dumps(seen), flush=True)
    workload()
    if WARM and os.environ.get("SCRIPT_EXIT"):
        sys.exit(int(os.environ["SCRIPT_EXIT"]))
"""
)


def script_capture(workdir: Path, double: Path, env: dict | None = None):
    (workdir / "ws.py").write_text(SCRIPT)
    full = {**replay("affine"), "IKET_DOUBLE_LAUNCHED": str(workdir / "launched"), **(env or {})}
    return run_iket(
        "profile", "--run-iket", double, "-o", "cap", "ws.py", "a1", "--", "-x", cwd=workdir, env=full
    )


def test_a_script_target_hands_its_second_pass_to_the_standby(workdir, double):
    result = script_capture(workdir, double)
    assert result.code == 0, result
    out = result.stdout + result.stderr
    tracker, captured = records(out)
    assert [tracker["warm"], captured["warm"]].count(True) == 1, "exactly one pass ran in the worker"
    mains = [json.loads(line.split("MAIN ", 1)[1]) for line in out.splitlines() if "MAIN " in line]
    assert len(mains) == 2 and mains[0] == mains[1], "the worker runs the script as python would"
    assert mains[0]["name"] == "__main__" and mains[0]["argv"][1:] == ["a1", "-x"]
    assert mains[0]["path0"] == str(workdir)
    record = json.loads((workdir / "cap" / "manifest.json").read_text())
    assert record["warm"] == {"modules": ["numpy"], "used": True}


def test_a_script_that_exits_in_the_worker_fails_the_capture_with_its_status(workdir, double):
    result = script_capture(workdir, double, {"SCRIPT_EXIT": "3"})
    assert result.code == 1, result
    assert re.search(r"the workload exited with status 3 in the (tracker|capture) pass", result.stderr)
    assert "Traceback" not in result.stderr
