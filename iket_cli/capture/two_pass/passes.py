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
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from ...errors import CaptureError, CaptureInterrupted, CaptureTimeout, IketError, Status
from ...model.units import human_bytes
from ...model.vocab import EXTRACT_DIR, OVERHEAD_DIR, PROCS_NAME, TRACKER_DIR, TRACKER_FRESH, WARM_LOG_NAME
from ...system import runner, spawn, tree
from ...system.filesystem import is_full
from .. import runiket
from .._shim import STREAM_ENV, WARNINGS, WORKLOAD_WARNINGS_ENV
from ..events import Reporter
from ..hook import hook_env
from ..plan import Plan
from ..saved_calls import extract
from ..staging import Staging
from . import budget, warm

#: The FIFO in the staging root through which the shim sends the workload's output live.
FIFO_NAME = "workload.fifo"
#: The hook's records of the --overhead run (kept apart from the capture's).
OVERHEAD_PROCS_NAME = "overhead-processes.jsonl"


#: Log lines kept in memory once a full disk refuses them (the last ones are the telling ones).
UNWRITTEN_LINES = 2000


class Transcript:
    """An attempt's console: each line into ``iket.log`` and to the reporter.

    A full disk does not stop the capture's console: the lines the log cannot take are
    kept (the last :data:`UNWRITTEN_LINES`), and ``full`` holds the error, so the evidence
    step can make room and write them.
    """

    def __init__(self, log: IO[str], reporter: Reporter) -> None:
        self.log = log
        self.reporter = reporter
        self.full: OSError | None = None
        self.unwritten: deque[str] = deque(maxlen=UNWRITTEN_LINES)

    def write(self, text: str) -> None:
        """One line into the log only."""
        if self.full is None:
            try:
                self.log.write(text + "\n")
                return
            except OSError as error:
                if not is_full(error):
                    raise
                self.full = error
        self.unwritten.append(text)

    def line(self, text: str) -> None:
        """A line of output, the workload's or a tool's."""
        self.write(text)
        self.reporter.output(text, tool=runiket.is_tool_line(text))

    def note(self, text: str) -> None:
        """iket's own ``# ...`` line, in the log only."""
        self.write(f"# {text}")


@dataclass(frozen=True)
class PassResult:
    """How one run of run-iket ended."""

    returncode: int | None  # None when it was stopped (see error)
    duration_s: float
    tail: list[runner.Line]
    phase: str  # the phase run-iket was in last
    device_buffer: int | None = None  # bytes, as run-iket announced after the tracker pass
    warm: dict[str, Any] | None = None  # the warm standby's record, where one ran
    error: IketError | None = None  # a timeout, an interrupt or a --max-buffer stop
    warp_trace: bool = False  # --warp-trace: one pass only (no tracker pass), its failure said so

    @property
    def status(self) -> str:
        """The manifest status of a capture that ends here: ok, timeout, interrupted, failed."""
        if self.error is not None:
            return self.error.manifest_status
        return Status.FAILED if self.returncode else Status.OK

    def failure(self) -> IketError | None:
        """The error this run stands for, or None when it succeeded."""
        if self.error is not None:
            return self.error
        if self.returncode:
            return runiket.classify(
                self.tail, self.returncode, self.phase, self.device_buffer, warp_trace=self.warp_trace
            )
        return None


class _Follower:
    """Follows one run's lines: the phase, the announced buffer, the --max-buffer stop, and
    the budget against the tracker pass's count as the capture pass starts (``--strict``: stop)."""

    def __init__(
        self, plan: Plan, transcript: Transcript, *, track_phases: bool, tracker: Path | None = None
    ) -> None:
        self.plan = plan
        self.transcript = transcript
        self.track_phases = track_phases
        self.tracker = tracker  # the tracker pass's output folder, read as the capture pass starts
        self.phase = "setup"
        self.device_buffer: int | None = None
        self.stop = threading.Event()
        self.stopped: CaptureError | None = None  # why a strict check stopped the run

    def __call__(self, line: runner.Line) -> None:
        self.transcript.write(line.text)
        if line.stopping:
            return  # the dying words of a tree iket is stopping: in the log only
        if self.track_phases and line.tool:
            self._follow(line.text)
        self.transcript.reporter.output(line.text, tool=line.tool or runiket.is_injection_line(line.text))

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
            if phase == "capture" and self.tracker is not None:
                opts = self.plan.options
                self._budget(budget.short(opts.max_ts_cnt_per_warp, self.tracker, stopping=opts.strict))

    def _budget(self, short: CaptureError | None) -> None:
        """A budget below the tracker pass's count: said now, before the capture pass is spent;
        with ``--strict`` the run stops here."""
        if short is None:
            return
        self.transcript.write(f"[iket] {short.message}")
        if self.plan.options.strict:
            self.stopped = short
            self.stop.set()
        else:
            self.transcript.reporter.warn(short.message, short.hint)

    def why_stopped(self, tail: list[runner.Line]) -> CaptureError:
        if self.stopped is not None:
            return self.stopped
        size, limit = self.device_buffer or 0, self.plan.options.max_buffer or 0
        return CaptureError(
            f"run-iket would allocate a {human_bytes(size)} trace buffer, over --max-buffer "
            f"{human_bytes(limit)}; stopped before the capture pass",
            phase="capture",
            hint="capture fewer clusters (--enabled-cluster X,Y,Z or --enabled-cluster-config), "
            "fewer timestamps per warp (--max-ts-cnt-per-warp), or fewer launches",
            details=runiket.last_lines(tail),
        )


def capture(
    plan: Plan,
    staging: Staging,
    transcript: Transcript,
    *,
    deadline: float | None,
    cancel: threading.Event | None = None,
    into: Path | None = None,
    standby: warm.Standby | None = None,
    extra_env: dict[str, str] | None = None,
) -> PassResult:
    """The tracker and capture passes, with a warm standby beside them where it helps.

    ``into``: run-iket's output folder (default: the staging's capture folder; a repeat has
    its own). ``standby``: one started earlier (:func:`ahead`), beside an earlier repeat, to
    serve this run's only pass; it is closed here. ``extra_env``: more for the passes'
    environment (where the CLI's input is served, :mod:`.stdin`).
    """
    argv = runiket.profile_argv(plan, into or staging.capture_dir)
    fifo = staging.root / FIFO_NAME
    if not fifo.exists():
        os.mkfifo(fifo)
    procs = staging.root / PROCS_NAME
    tracker = plan.tracker.dir or (into or staging.capture_dir) / TRACKER_DIR
    follower = _Follower(plan, transcript, track_phases=True, tracker=tracker)
    if standby is None:
        # the standby serves a second pass: none follows when the tracker pass is skipped
        two_passes = plan.tracker.mode == TRACKER_FRESH
        standby = warm.standby_for(
            plan.warm_target,
            plan.cwd,
            staging.root / WARM_LOG_NAME,
            staging.token,
            enabled=plan.options.warm and two_passes,
        )
        if standby is not None:
            standby.start(plan.python, _env(plan, staging, procs), plan.cwd)
    if standby is None:
        return _run(plan, argv, _env(plan, staging, procs, extra_env), follower, staging, deadline, cancel)
    env = _env(plan, staging, procs, {**standby.env, **(extra_env or {})})
    try:
        result = _run(plan, argv, env, follower, staging, deadline, cancel)
    finally:
        record = standby.close()
    return replace(result, warm=record)


def ahead(plan: Plan, staging: Staging, name: str) -> warm.Standby | None:
    """A standby started now for a later run (a repeat's): it imports while this one runs.

    ``name`` tells its socket and log apart from the others'."""
    if not plan.options.warm:
        return None
    log = staging.root / WARM_LOG_NAME.replace(".", f"-{name}.", 1)  # warm-r2.log
    standby = warm.standby_for(plan.warm_target, plan.cwd, log, staging.token, name=name)
    if standby is not None:
        standby.start(plan.python, _env(plan, staging, staging.root / PROCS_NAME), plan.cwd)
    return standby


def plain(
    plan: Plan,
    staging: Staging,
    transcript: Transcript,
    *,
    deadline: float | None,
    cancel: threading.Event | None = None,
) -> PassResult:
    """``--overhead``'s run: warp lifetimes only, into ``staging.root/overhead``."""
    argv = runiket.overhead_argv(plan, staging.root / OVERHEAD_DIR)
    transcript.note(f"--overhead run: {spawn.quote(argv)}")
    env = _env(plan, staging, staging.root / OVERHEAD_PROCS_NAME)
    follower = _Follower(plan, transcript, track_phases=False)
    return _run(plan, argv, env, follower, staging, deadline, cancel)


def _env(plan: Plan, staging: Staging, procs: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of run-iket and the passes (``extra``: the warm standby's socket).

    Every process under it carries the capture's marker (see ``tree.MARK_ENV``), so the
    watchdog and the next capture can find them wherever they were re-parented.
    """
    env = {
        **plan.tool.child_env(plan.env),
        STREAM_ENV: str(staging.root / FIFO_NAME),
        tree.MARK_ENV: staging.token,
        **(extract.replay_env(staging.root / EXTRACT_DIR) if plan.extract is not None else {}),
        **(extra or {}),
    }
    if WARNINGS in env:  # the workload's, not run-iket's: the shim gives it back (see _shim)
        env[WORKLOAD_WARNINGS_ENV] = env.pop(WARNINGS)
    return hook_env(env, procs)


def _run(
    plan: Plan,
    argv: list[str],
    env: dict[str, str],
    follower: _Follower,
    staging: Staging,
    deadline: float | None,
    cancel: threading.Event | None,
) -> PassResult:
    """One run-iket command; a timeout, an interrupt or a stop becomes the result's error.
    The capture's processes are recorded meanwhile (:class:`~iket_cli.system.tree.Recorder`)."""
    start = time.monotonic()
    timeout = None if deadline is None else max(deadline - start, 0.001)

    def ended(code: int | None, tail: list[runner.Line], error: IketError | None = None) -> PassResult:
        if error is not None:
            follower.transcript.note(error.message)
            error.details = error.details or runiket.last_lines(tail)
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
            side_stream=staging.root / FIFO_NAME,
            stop=follower.stop,
            cancel=cancel,
            on_tick=staging.recorder.update,
        )
    except runner.Stopped as stopped:
        return ended(None, stopped.tail, follower.why_stopped(stopped.tail))
    except (CaptureTimeout, CaptureInterrupted) as stop:
        return ended(None, getattr(stop, "tail", []), stop)
    return PassResult(
        done.returncode,
        done.duration_s,
        done.tail,
        follower.phase,
        follower.device_buffer,
        warp_trace=plan.options.warp_trace,
    )
