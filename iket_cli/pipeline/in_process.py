"""``iket profile --window`` and ``--one-pass``: the capture's one run, its session inside it.

Instead of run-iket's two passes: the workload runs once under iket's start-up hook, which
opens NVIDIA's in-process session (:mod:`iket_cli.capture.in_process.child`); the traces it saved
are then finished as a window's are (Perfetto from the JSON, lint, report) and judged from
the injection's log and the traces themselves (no tracker pass, no raw capture).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from ..analysis import window_losses
from ..capture import runiket
from ..capture.in_process import child, session
from ..capture.plan import Plan
from ..model import injection_log
from ..model import trace as trace_mod
from ..model.completeness import Completeness
from ..model.vocab import WINDOW_DIR
from ..system.runner import Line
from .attempt import Attempt, Facts


def settings(plan: Plan) -> session.Settings:
    """The session's options: ``--max-ts-cnt-per-warp`` and ``--context-buffer-size`` where
    given, else the library's defaults (256 timestamps a warp, a 512 MiB buffer)."""
    opts = plan.options
    return session.settings_for(
        opts.max_ts_cnt_per_warp,
        opts.context_buffer_size,
        opts.log_level or runiket.DEFAULT_LOG_LEVEL,
        warp_trace=opts.warp_trace,
        enabled_cluster=opts.enabled_cluster,
        spelled="--{}",
    )


def library(plan: Plan) -> Path:
    """The session library: ``IKET_CLI_SESSION_LIBRARY``, else the one beside run-iket."""
    return session.find_library(env=plan.env, dsl_packages=plan.tool.dsl_packages)


def run(at: Attempt, facts: Facts) -> Facts:
    """The workload's one run; its traces moved into the capture folder."""
    plan, staging, transcript = at.plan, at.staging, at.transcript
    folder = staging.root / WINDOW_DIR
    asked = settings(plan)
    spec = child.spec(plan.window, one_pass=plan.options.one_pass, folder=folder,
                           library=library(plan), settings=asked)  # fmt: skip
    what = (
        "the whole run"
        if plan.options.one_pass
        else f"{plan.window.function}, {plan.window.describe_calls()}"
    )
    transcript.reporter.phase("window")
    transcript.note(f"one run of {plan.target.describe()} with IKET's in-process session around {what}")

    def line(text: Line) -> None:
        transcript.write(text.text)
        if not text.stopping:
            transcript.reporter.output(text.text, tool=runiket.is_injection_line(text.text))

    found = child.run(
        plan.target, spec, python=plan.python, env=plan.env, cwd=plan.cwd, staging=staging, on_line=line,
        deadline=at.deadline, limit_s=plan.options.timeout, cancel=at.cancel,
    )  # fmt: skip
    staging.capture_dir.mkdir(exist_ok=True)
    child.moved(folder, staging.capture_dir)
    shutil.rmtree(folder, ignore_errors=True)  # its state is in the manifest now
    found["settings"] = {**spec["settings"], "library": spec["library"]}
    if found.get("closing"):
        transcript.reporter.warn(
            f"IKET's session refused to close after the window's trace was saved: {found['closing']}",
            "the trace is whole; the workload went on (the session's own lines are in iket.log)",
        )
    return replace(facts, window=found)


def judged(at: Attempt, window: dict | None = None) -> Completeness:
    """What the windows lost, from the injection's lines in the log and each trace, and the
    calls ``--calls A-B`` asked for that the run never made (``window``: the run's record)."""
    plan, staging, transcript = at.plan, at.staging, at.transcript
    level = plan.options.log_level or runiket.DEFAULT_LOG_LEVEL
    lines = _injection_lines(staging.log_path)
    found = Completeness()
    for path in sorted(staging.capture_dir.glob("iket_pid_*.trace.json")):
        one = window_losses.of_window(
            trace_mod.load(path), lines, level, plan.options.max_ts_cnt_per_warp or session.DEFAULT_MAX_TS
        )
        found.losses += [loss for loss in one.losses if loss not in found.losses]
        found.checked = list(dict.fromkeys([*found.checked, *one.checked]))
        found.unchecked = [u for u in one.unchecked if u not in found.unchecked] + found.unchecked
    short = window_losses.calls_short(window or {})
    if short is not None:
        found.losses.append(short)
        found.checked.append("window")
    for loss in found.losses:
        transcript.write(f"[iket] incomplete: {loss.message}")
    skipped = injection_log.read_lines(lines).skipped_modules
    if skipped:
        transcript.reporter.info(skipped_note(skipped))
    return found


def skipped_note(count: int) -> str:
    """The injection's "could not inspect a CUDA module" lines, summarised (iket.log has each)."""
    return (
        f"IKET skipped {count} CUDA module(s) it could not inspect (libraries such as cuBLAS loaded "
        "before the window): their kernels are not traced; yours are"
    )


def _injection_lines(log: Path) -> list[str]:
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            return [line for line in handle if runiket.is_injection_line(line)]
    except OSError:
        return []
