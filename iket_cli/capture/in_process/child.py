"""``--window`` and ``--one-pass``: the workload once, its session in its own process.

The start-up hook (``_hook/iket_window.py``) opens NVIDIA's in-process session around FUNC's
chosen calls (``--window``) or the whole process (``--one-pass``) and saves each window's trace
JSON into the folder given; this module runs the workload (through the shim, under
``--timeout``, Ctrl-C and the watchdog, as a pass: its processes carry the capture's mark),
stops its tree once the window is saved (``--window`` unless ``--no-stop-after``), and says in
one line what went wrong otherwise, the window's fate included: a process that died inside
it (a half-precision GEMM there aborts it, docs/faults.md) is named with what ran in it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

from ...errors import CaptureError
from ...model import jsonio
from ...model.artifacts import count_keys
from ...model.vocab import PROCS_NAME
from ...system import filesystem, tree
from .._hook.iket_saved import WINDOW_SPEC_ENV as SPEC_ENV
from .._hook.iket_saved import WINDOW_STATE as STATE
from ..hook import hook_env
from ..runiket import is_injection_line, last_lines
from ..saved_calls.extract import Extract
from ..saved_calls.record_run import run_once
from ..staging import Staging
from ..targets import Target
from .session import Settings

#: The folder that holds the ``iket_cli`` package: the hook imports the session's binding from it.
IKET_ROOT = str(Path(__file__).resolve().parents[3])
#: The narrower window a dead process needs (docs/faults.md: a bf16 GEMM aborts in a session).
NARROWER = (
    "IKET's session cannot survive some library kernels (a half-precision cuBLAS GEMM aborts the "
    "process): choose a FUNC that launches only your instrumented kernels (--window MODULE:FUNC)"
)


def spec(
    plan_window: Extract | None, *, one_pass: bool, folder: Path, library: Path, settings: Settings
) -> dict[str, Any]:
    """The hook's instructions (``IKET_CLI_WINDOW``)."""
    found: dict[str, Any] = {
        "dir": str(folder),
        "iket_root": IKET_ROOT,
        "library": str(library),
        "settings": dataclasses.asdict(settings),  # every field: none is dropped on the way
        "one_pass": one_pass,
    }
    if plan_window is not None:
        found.update(plan_window.spec(folder))
        found["dir"] = str(folder)
    return found


def run(
    target: Target,
    the_spec: dict[str, Any],
    *,
    python: str,
    env: dict[str, str],
    cwd: Path,
    staging: Staging,
    on_line: Any,
    deadline: float | None,
    limit_s: float | None,
    cancel: threading.Event | None,
) -> dict[str, Any]:
    """Run the workload once with its window(s); the manifest's ``window`` record. The traces
    are left in the spec's folder (``iket_pid_<hex>.trace.json``; ``--one-pass``: one folder
    per process)."""
    folder = Path(the_spec["dir"])
    folder.mkdir(parents=True, exist_ok=True)
    run_env = hook_env(
        {**env, SPEC_ENV: json.dumps(the_spec), tree.MARK_ENV: staging.token}, staging.root / PROCS_NAME
    )
    stop = threading.Event()
    watch = not the_spec["one_pass"] and the_spec.get("stop", True)

    def tick() -> None:
        staging.recorder.update()
        if watch and (_state(folder).get("closed") is not None):
            stop.set()  # the window is saved: the rest of the run is not wanted

    returncode, tail, seconds = run_once(
        target.workload_argv(python), env=run_env, cwd=cwd, on_line=on_line, deadline=deadline,
        limit_s=limit_s, stop=stop, cancel=cancel, on_tick=tick, phase="window", said=lambda: _inside(folder),
    )  # fmt: skip
    return _outcome(the_spec, folder, returncode, tail, seconds)


def _state(folder: Path) -> dict[str, Any]:
    try:
        found = jsonio.read(folder / STATE)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _inside(folder: Path) -> str:
    state = _state(folder)
    if state.get("open") is not None and state.get("closed") is None:
        return f" inside the window (call {state['open']} of {state.get('function')})"
    return ""


def _outcome(
    the_spec: dict[str, Any], folder: Path, returncode: int, tail: list, seconds: float
) -> dict[str, Any]:
    if returncode != 0 and filesystem.nearly_full(folder):  # the disk, not the workload
        raise filesystem.disk_full(folder, writing="the window's trace")
    traces = sorted(folder.rglob("iket_pid_*.trace.json"))
    if the_spec["one_pass"]:
        states = [_state(p.parent) for p in traces]
        refused = [s["refused"] for s in map(_state, folder.glob("pid_*")) if s.get("refused")]
        if refused:
            raise CaptureError(f"IKET's in-process session failed: {refused[0]}", phase="window",
                               hint="the injection's own lines are in the log (iket.log)")  # fmt: skip
        if returncode != 0 or not traces:
            raise _failed(returncode, tail, "" if traces else "before any process saved its window")
        return {"one_pass": True, "run_s": seconds, "processes": len(traces),
                "window_s": max((s.get("window_s") or 0) for s in states)}  # fmt: skip
    state = _state(folder)
    function, calls = the_spec.get("function"), the_spec.get("calls") or []
    if state.get("refused"):
        raise CaptureError(
            f"IKET's in-process session failed: {state['refused']}",
            phase="window",
            hint="the injection's own lines are in the log (iket.log); iket doctor --gpu checks the stack",
        )
    if state.get("open") is not None and state.get("closed") is None:
        raise _died(returncode, tail, function, state["open"])
    if state.get("closed") is None:
        seen = int(state.get("seen") or 0)
        times = "never called" if not seen else f"called {seen} time{'s' if seen > 1 else ''}"
        if returncode != 0:
            raise _failed(returncode, tail, f"before {function}'s window ({times})")
        raise CaptureError(
            f"{function} was {times} in the run; --calls needs {max(calls)}",
            phase="window",
            hint="check that the workload calls FUNC (the module and name it imports), or choose --calls",
        )
    if state.get("error"):
        ended = f"the run failed with status {_status(returncode)}" if returncode else "the run caught it"
        raise CaptureError(
            f"call {state['closed']} of {function} raised inside the window; {ended}",
            phase="window",
            hint="the window's trace is kept as evidence; the run's output is in the log",
            details=_said(tail),
        )
    held = [calls[0], min(calls[-1], int(state["closed"]))]  # closed at exit: the run made fewer
    window = {"function": function, "calls": held, "asked": [calls[0], calls[-1]], "run_s": seconds,
              "window_s": state.get("window_s"), "seen": state.get("seen")}  # fmt: skip
    if state.get("closing"):  # the trace was saved; the session would not close
        window["closing"] = state["closing"]
    if not traces:
        raise CaptureError(f"the window around {function} saved no trace", phase="window")
    return window


def _failed(returncode: int, tail: list, when: str) -> CaptureError:
    return CaptureError(
        f"the window run failed with status {_status(returncode)}" + (f" {when}" if when else ""),
        phase="window",
        hint="it ran without run-iket, with IKET's session in its process: the output is in the log",
        details=_said(tail),
    )


def _died(returncode: int, tail: list, function: str | None, call: int) -> CaptureError:
    return CaptureError(
        f"the workload died with status {_status(returncode)} inside the window, during call {call} "
        f"of {function}",
        phase="window",
        hint=NARROWER,
        details=_said(tail),
    )


def _said(tail: list) -> list[str]:
    """The run's last lines worth showing under an error: the injection's are in the log."""
    return [line for line in last_lines(tail) if not is_injection_line(line)]


def _status(returncode: int) -> str:
    """The exit status, and the signal it stands for (a shell's 128+N too)."""
    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 192 else 0
    try:
        return f"{returncode} ({signal.Signals(number).name})" if number else str(returncode)
    except ValueError:
        return str(returncode)


def moved(folder: Path, capture_dir: Path) -> list[str]:
    """The windows' traces moved into the capture folder, as run-iket names them; a process
    that launched nothing in its window (``--one-pass``: a launcher, the shim before its exec)
    is left out, as run-iket leaves it out."""
    names = []
    for trace in sorted(folder.rglob("iket_pid_*.trace.json")):
        (launches,) = count_keys(trace, (b'"kernelName"',))
        if launches:
            os.replace(trace, capture_dir / trace.name)
            names.append(trace.name)
    return names
