"""The passes: run-iket's tracker and capture passes, and ``--overhead``'s warp-trace run.

Every line a run prints goes into the attempt's ``iket.log`` and to the reporter (a
:class:`Transcript`). The capture run also follows run-iket's phase lines, and stops the
whole tree before the capture pass when the buffer run-iket announces is over
``--max-buffer``. A run returns a :class:`PassResult`: how it ended, never an exception
for the workload's failure, a timeout, an interrupt or a stop (those are its ``error``,
with the process tree already gone).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from ..errors import CaptureError, CaptureInterrupted, CaptureTimeout, IketError
from ..model.units import human_bytes
from ..model.vocab import OVERHEAD_DIR, PROCS_NAME, WARM_LOG_NAME
from . import runiket, runner, spawn, warm
from ._shim import STREAM_ENV
from .events import Reporter
from .hook import hook_env
from .outdir import Staging
from .plan import Plan

#: The FIFO in the staging root through which the shim sends the workload's output live.
FIFO_NAME = "workload.fifo"
#: The hook's records of the --overhead run (kept apart from the capture's).
OVERHEAD_PROCS_NAME = "overhead-processes.jsonl"


class Transcript:
    """An attempt's console: each line into ``iket.log`` and to the reporter."""

    def __init__(self, log: IO[str], reporter: Reporter) -> None:
        self.log = log
        self.reporter = reporter

    def line(self, text: str) -> None:
        """A line of output, the workload's or a tool's."""
        self.log.write(text + "\n")
        self.reporter.output(text, tool=runiket.is_tool_line(text))

    def note(self, text: str) -> None:
        """iket's own ``# ...`` line, in the log only."""
        self.log.write(f"# {text}\n")


@dataclass(frozen=True)
class PassResult:
    """How one run of run-iket ended."""

    returncode: int | None  # None when it was stopped (see error)
    duration_s: float
    tail: list[str]
    phase: str  # the phase run-iket was in last
    device_buffer: int | None = None  # bytes, as run-iket announced after the tracker pass
    warm: dict[str, Any] | None = None  # the warm standby's record, where one ran
    error: IketError | None = None  # a timeout, an interrupt or a --max-buffer stop

    @property
    def status(self) -> str:
        """The manifest status of a capture that ends here: ok, timeout, interrupted, failed."""
        if isinstance(self.error, CaptureTimeout):
            return "timeout"
        if isinstance(self.error, CaptureInterrupted):
            return "interrupted"
        return "failed" if self.error or self.returncode else "ok"

    def failure(self) -> IketError | None:
        """The error this run stands for, or None when it succeeded."""
        if self.error is not None:
            return self.error
        if self.returncode:
            return runiket.classify(self.tail, self.returncode, self.phase, self.device_buffer)
        return None


class _Follower:
    """Follows one run's lines: the phase, the announced buffer, the --max-buffer stop."""

    def __init__(self, plan: Plan, transcript: Transcript, *, track_phases: bool) -> None:
        self.plan = plan
        self.transcript = transcript
        self.track_phases = track_phases
        self.phase = "setup"
        self.device_buffer: int | None = None
        self.stop = threading.Event()

    def __call__(self, line: str) -> None:
        self.transcript.log.write(line + "\n")
        tool = runiket.is_tool_line(line)
        if self.track_phases and tool:
            self._follow(line)
        self.transcript.reporter.output(line, tool=tool)

    def _follow(self, line: str) -> None:
        announced = runiket.announced_buffer(line)
        if announced is not None:
            self.device_buffer = announced
            limit = self.plan.options.max_buffer
            if limit is not None and announced > limit:
                self.stop.set()  # before the capture pass allocates it
        phase = runiket.phase_of(line)
        if phase is not None and phase != self.phase:
            self.phase = phase
            self.transcript.reporter.phase(phase)

    def over_budget(self, tail: list[str]) -> CaptureError:
        size, limit = self.device_buffer or 0, self.plan.options.max_buffer or 0
        return CaptureError(
            f"run-iket would allocate a {human_bytes(size)} trace buffer, over --max-buffer "
            f"{human_bytes(limit)}; stopped before the capture pass",
            phase="capture",
            hint="capture fewer clusters (--enabled-cluster X,Y,Z or --enabled-cluster-config), "
            "fewer timestamps per warp (--max-ts-cnt-per-warp), or fewer launches",
            details=[line for line in tail if not runiket.is_noise(line)][-5:],
        )


def capture(plan: Plan, staging: Staging, transcript: Transcript, *, deadline: float | None) -> PassResult:
    """The tracker and capture passes, with a warm standby beside them where it helps."""
    argv = runiket.profile_argv(plan, staging.capture_dir)
    fifo = staging.root / FIFO_NAME
    if not fifo.exists():
        os.mkfifo(fifo)
    procs = staging.root / PROCS_NAME
    follower = _Follower(plan, transcript, track_phases=True)
    standby = warm.standby_for(plan.target, plan.cwd, staging.root / WARM_LOG_NAME, enabled=plan.options.warm)
    if standby is None:
        return _run(plan, argv, _env(plan, fifo, procs), follower, fifo, deadline)
    extra = standby.start(plan.python, _env(plan, fifo, procs), plan.cwd)
    try:
        result = _run(plan, argv, _env(plan, fifo, procs, extra), follower, fifo, deadline)
    finally:
        record = standby.close()
    return replace(result, warm=record)


def plain(plan: Plan, staging: Staging, transcript: Transcript, *, deadline: float | None) -> PassResult:
    """``--overhead``'s run: warp lifetimes only, into ``staging.root/overhead``."""
    argv = runiket.overhead_argv(plan, staging.root / OVERHEAD_DIR)
    transcript.note(f"--overhead run: {spawn.quote(argv)}")
    fifo = staging.root / FIFO_NAME
    env = _env(plan, fifo, staging.root / OVERHEAD_PROCS_NAME)
    return _run(plan, argv, env, _Follower(plan, transcript, track_phases=False), fifo, deadline)


def _env(plan: Plan, fifo: Path, procs: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of run-iket and the passes (``extra``: the warm standby's socket)."""
    env = {**plan.tool.child_env(plan.env), STREAM_ENV: str(fifo), **(extra or {})}
    return hook_env(env, procs)


def _run(
    plan: Plan,
    argv: list[str],
    env: dict[str, str],
    follower: _Follower,
    fifo: Path,
    deadline: float | None,
) -> PassResult:
    """One run-iket command; a timeout, an interrupt or a stop becomes the result's error."""
    start = time.monotonic()
    timeout = None if deadline is None else max(deadline - start, 0.001)

    def ended(code: int | None, tail: list[str], error: IketError | None = None) -> PassResult:
        if error is not None:
            follower.transcript.note(error.message)
        return PassResult(
            code, time.monotonic() - start, tail, follower.phase, follower.device_buffer, error=error
        )

    try:
        done = runner.run_streaming(
            argv,
            env=env,
            cwd=plan.cwd,
            on_line=follower,
            timeout=timeout,
            limit_s=plan.options.timeout,
            side_stream=fifo,
            stop=follower.stop,
        )
    except runner.Stopped as stopped:
        return ended(None, stopped.tail, follower.over_budget(stopped.tail))
    except (CaptureTimeout, CaptureInterrupted) as stop:
        return ended(None, stop.details, stop)
    return PassResult(done.returncode, done.duration_s, done.tail, follower.phase, follower.device_buffer)
