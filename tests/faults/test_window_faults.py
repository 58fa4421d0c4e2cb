"""A window's faults through the real CLI and the real API, against the session's C stand-in:
a full disk, a refused close, threads racing into FUNC, a fork inside a window, a nested window,
a generator decorated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from iket_cli.model import manifest

from conftest import FIXTURES, ROOT, run_iket, session_env

THREADED = """
import threading
from stepper import step
def worker():
    for i in range(4):
        step(i)
threads = [threading.Thread(target=worker) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done", flush=True)
"""
STEPPER = "def step(i):\n    return i\n"
BIG_TRACE_LINES = 40000


def api(tmp_path, library, body, **env):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    full = {**os.environ, **session_env(library), "PYTHONPATH": str(ROOT)}
    full.update(env)
    return subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=full, capture_output=True, text=True
    )


def window_run(tmp_path, calls, out, env):
    """``iket profile work.py --window stepper:step --calls CALLS --no-stop-after -o OUT``."""
    argv = ["profile", "work.py", "--window", "stepper:step", "--calls", calls, "--no-stop-after", "-o", out]
    return run_iket(*argv, cwd=tmp_path, env=env)


def test_threads_calling_func_never_lose_the_window(tmp_path, library):
    """16 threads calling FUNC: the claim and the count raced ("never called", 3 of 10 runs)."""
    (tmp_path / "stepper.py").write_text(STEPPER)
    (tmp_path / "work.py").write_text(THREADED)
    for run in range(3):
        done = window_run(tmp_path, "5", f"out{run}", session_env(library))
        assert done.code == 0, done
        window = manifest.read(tmp_path / f"out{run}")["window"]
        assert window["seen"] == 64 and window["calls"] == [5, 5]


def test_a_refused_close_after_the_trace_was_saved_never_reaches_the_workload(tmp_path, library):
    """A kept session that refuses to clear (or a new one to be destroyed) in the --window hook raised
    iket's SessionError inside the user's code."""
    (tmp_path / "stepper.py").write_text(STEPPER)
    (tmp_path / "work.py").write_text(
        "from stepper import step\nfor i in range(3):\n    step(i)\nprint('done')\n"
    )
    env = {**session_env(library), "IKET_DOUBLE_FAIL": "ClearTraceData=5"}
    done = window_run(tmp_path, "2", "out", env)
    assert done.code == 0, done
    assert "done" in done.stdout and "SessionError" not in done.stderr + done.stdout
    assert "IKET's session refused to close" in done.stderr
    assert manifest.read(tmp_path / "out")["status"] == "ok"


def test_a_full_disk_inside_a_window_is_said_as_a_full_disk_with_its_evidence(tmp_path, library, small_disk):
    """The session's SaveTrace fills the disk: not a raw OSError (API), not the workload blamed
    with the bf16 hint (CLI)."""
    big = tmp_path / "big.trace.json"
    data = json.loads((FIXTURES / "session" / "plain.trace.json").read_text())
    data["padding"] = ["x" * 100] * BIG_TRACE_LINES  # 4 MB: more than the 2 MB disk holds
    big.write_text(json.dumps(data))
    done = api(
        tmp_path,
        library,
        f"""
        import iket_cli
        from iket_cli.errors import IketError
        try:
            with iket_cli.window({str(small_disk / "w")!r}):
                pass
        except IketError as error:
            print("said:", error.message)
        """,
        IKET_DOUBLE_TRACE=str(big),
    )
    assert done.returncode == 0, done.stderr
    assert "said: no space left on the disk holding" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not [p for p in small_disk.iterdir() if ".iket-staging-" in p.name]
    (tmp_path / "stepper.py").write_text(STEPPER)
    (tmp_path / "work.py").write_text("from stepper import step\nstep(1)\n")
    cli = run_iket(
        "profile",
        "work.py",
        "--window",
        "stepper:step",
        "-o",
        small_disk / "cli",
        cwd=tmp_path,
        env={**session_env(library), "IKET_DOUBLE_TRACE": str(big)},
    )
    assert cli.code == 1 and "no space left on the disk holding" in cli.stderr, cli
    assert "half-precision" not in cli.stderr and "Traceback" not in cli.stderr


def test_a_fork_inside_a_window_leaves_the_window_to_its_parent(tmp_path, library):
    """The child of an ``os.fork`` inside the block used to publish or fail the parent's window,
    which then lost its capture with a raw FileNotFoundError."""
    done = api(
        tmp_path,
        library,
        """
        import os, iket_cli
        with iket_cli.window("out") as w:
            child = os.fork()
            if child:  # the parent leaves the block only once the child has left it
                os.waitpid(child, 0)
        if child == 0:
            os._exit(0)
        print("published", w.capture.output_dir.name, flush=True)
        """,
    )
    assert done.returncode == 0 and "published out" in done.stdout, done.stderr
    assert manifest.read(tmp_path / "out")["status"] == "ok" and not (tmp_path / "out.failed").exists()


def test_a_window_nested_in_one_into_the_same_folder_names_this_process(tmp_path, library):
    done = api(
        tmp_path,
        library,
        """
        import iket_cli
        from iket_cli.errors import IketError
        with iket_cli.window("out"):
            try:
                with iket_cli.window("out", clobber=True):
                    pass
            except IketError as error:
                print("said:", error.message)
        """,
    )
    assert "said: this process is already using" in done.stdout, done.stdout + done.stderr
    assert "another iket command" not in done.stdout


def test_a_generator_or_async_function_is_refused_as_a_window_decorator(tmp_path, library):
    done = api(
        tmp_path,
        library,
        """
        import iket_cli
        from iket_cli.errors import UsageError
        for source in ("def f():\\n    yield 1", "async def f():\\n    pass"):
            scope = {}
            exec(source, scope)
            try:
                iket_cli.window("out")(scope["f"])
            except UsageError as error:
                print("refused:", error.message[:60])
        """,
    )
    assert done.stdout.count("refused: iket_cli.window cannot decorate") == 2, done.stdout + done.stderr


def test_enabled_cluster_reaches_the_session_with_window(tmp_path, library):
    """``--enabled-cluster`` with ``--window`` was dropped on the way to the hook (flags 0)."""
    (tmp_path / "stepper.py").write_text(STEPPER)
    (tmp_path / "work.py").write_text("from stepper import step\nstep(1)\n")
    calls = tmp_path / "calls.txt"
    done = run_iket(
        "profile",
        "work.py",
        "--window",
        "stepper:step",
        "--enabled-cluster",
        "1,2,3",
        "-o",
        "out",
        cwd=tmp_path,
        env={**session_env(library), "IKET_DOUBLE_CALLS": str(calls)},
    )
    assert done.code == 0, done
    (set_options,) = [
        line.split() for line in calls.read_text().splitlines() if line.startswith("SetOptions")
    ]
    assert int(set_options[1]) & 1 and set_options[-1] == "1,2,3", set_options
