"""``--extract``'s record run: the workload once, without run-iket, while FUNC's calls are saved.

The start-up hook (``_hook/iket_extract.py``) wraps FUNC and saves the chosen calls into
the folder given; this module runs the workload (through the shim, as a pass would, under
``--timeout``, Ctrl-C and the watchdog: its processes carry the capture's mark), stops its
tree once the last chosen call is saved, and says in one line what went wrong otherwise.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from ...errors import CaptureError, CaptureInterrupted, CaptureTimeout, ExitCode
from ...model.units import human_bytes
from ...system import filesystem, runner, tree
from .._hook.iket_saved import OWNER, SPEC_ENV, UNSAVEABLE
from ..hook import hook_env
from ..runiket import last_lines
from ..targets import Target
from .extract import Extract, read_index, record_facts

#: The record run's processes, as the start-up hook names them.
RECORD_PROCS = "record-processes.jsonl"


def run_record(
    extract: Extract,
    record: Target,
    *,
    python: str,
    env: dict[str, str],
    cwd: Path,
    folder: Path,
    token: str,
    procs: Path,
    on_line: Any,
    deadline: float | None,
    limit_s: float | None,
    cancel: threading.Event | None,
    on_tick: Any = None,
) -> dict[str, Any]:
    """Run the workload once without run-iket, recording FUNC's chosen calls into ``folder``.

    Returns the record's facts for the manifest; raises a one-line error otherwise (exit 1;
    2 for an argument that cannot be saved), or the timeout or interrupt that stopped it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    spec = extract.spec(folder)
    run_env = hook_env({**env, SPEC_ENV: json.dumps(spec), tree.MARK_ENV: token}, procs)
    stop = threading.Event()
    watch = extract.stop_after and extract.calls != "last"

    def tick() -> None:
        if on_tick is not None:
            on_tick()
        if watch and read_index(folder).get("complete"):
            stop.set()  # the recording process has ended itself: the rest of the tree goes

    returncode, tail, seconds = run_once(
        record.workload_argv(python), env=run_env, cwd=cwd, on_line=on_line, deadline=deadline,
        limit_s=limit_s, stop=stop, cancel=cancel, on_tick=tick, phase="record", said=lambda: "",
    )  # fmt: skip
    return _outcome(extract, folder, returncode, tail, seconds)


def run_once(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    on_line: Any,
    deadline: float | None,
    limit_s: float | None,
    stop: threading.Event,
    cancel: threading.Event | None,
    on_tick: Any,
    phase: str,
    said: Any,
) -> tuple[int, list, float]:
    """The workload once without run-iket (``--extract``'s record run, ``--window``'s run):
    its exit status, last lines and seconds. Stopped by iket (``stop``: what was wanted is
    saved), it counts as a success; a timeout or an interrupt is raised, named after ``phase``
    with ``said()`` appended (where the run was)."""
    start = time.monotonic()
    timeout = None if deadline is None else max(deadline - start, 0.001)
    try:
        done = runner.run_streaming(
            argv, env=env, cwd=cwd, on_line=on_line, timeout=timeout, limit_s=limit_s, stop=stop,
            cancel=cancel, on_tick=on_tick,
        )  # fmt: skip
        returncode, tail = done.returncode, done.tail
    except runner.Stopped as stopped:
        returncode, tail = 0, stopped.tail
    except (CaptureTimeout, CaptureInterrupted) as error:
        error.message = f"the {phase} run: {error.message}{said()}"
        error.phase = phase
        raise
    return returncode, tail, round(time.monotonic() - start, 3)


def _outcome(extract: Extract, folder: Path, returncode: int, tail: list, seconds: float) -> dict[str, Any]:
    index = read_index(folder)
    problem = index.get("error") or {}
    if problem.get("kind") == "disk":
        _clear(folder)
        raise filesystem.disk_full(folder.parent.parent, writing="the saved calls")
    if problem:
        _clear(folder)
        code = (
            ExitCode.USAGE
            if problem.get("kind") == "unsaveable" or returncode == UNSAVEABLE
            else ExitCode.FAILED
        )
        hint = (
            f"raise --max-extract (now {human_bytes(extract.max_bytes)}), or choose a smaller call"
            if problem.get("kind") == "over"
            else "pass FUNC tensors, arrays, nn.Modules or picklable values; or extract a function below it"
        )
        raise CaptureError(
            f"--extract {extract.function}: {problem.get('message')}",
            phase="record",
            hint=hint,
            exit_code=code,
        )
    wanted = 1 if extract.calls == "last" else len(extract.calls)
    saved = index.get("calls") or []
    stopped = extract.stop_after and extract.calls != "last" and index.get("complete")
    if len(saved) == wanted and (stopped or returncode == 0):  # stopped by iket: its status is not the run's
        return record_facts(index, seconds)
    if returncode != 0:
        raise CaptureError(
            f"the record run failed with status {returncode}"
            + ("" if saved else f" before {extract.function} was recorded"),
            phase="record",
            hint="it ran without run-iket: fix the workload first (its output is in the log)",
            details=last_lines(tail),
        )
    seen = int(index.get("seen") or 0)
    times = "never called" if not seen else f"called {seen} time{'s' if seen > 1 else ''}"
    need = (
        ""
        if extract.calls == "last"
        else f"; --calls {_calls_word(extract.calls)} needs {max(extract.calls)}"
    )
    raise CaptureError(
        f"{extract.function} was {times} in the record run{need}",
        phase="record",
        hint="check that the workload calls FUNC (the module and name as it imports them), or choose --calls",
    )


def _calls_word(calls: tuple[int, ...]) -> str:
    return str(calls[0]) if len(calls) == 1 else f"{calls[0]}-{calls[-1]}"


def drop_partial(folder: Path) -> list[str]:
    """Remove the saved calls the index does not list (a call being saved when the run was
    stopped: a half-written pickle is no evidence) and the owner mark; the calls dropped."""
    listed = {c.get("folder") for c in read_index(folder).get("calls") or [] if isinstance(c, dict)}
    dropped = []
    for path in sorted(folder.glob("call-*")):
        if path.name not in listed:
            shutil.rmtree(path, ignore_errors=True)
            dropped.append(path.name.replace("-", " "))
    (folder / OWNER).unlink(missing_ok=True)
    return dropped


def _clear(folder: Path) -> None:
    """Nothing of a refused recording stays (its index says why, for the evidence)."""
    for path in folder.glob("call-*"):
        shutil.rmtree(path, ignore_errors=True)
