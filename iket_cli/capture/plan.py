"""What one capture will do, decided before anything runs: the options and the resolved plan.

:class:`Options` is what the user asked for; :func:`resolve` checks it against the machine
(the target exists, run-iket is found and new enough, the output directory may be used)
and returns a frozen :class:`Plan` that every later step reads and none changes. Every
refusal here is a usage error (exit 2) raised before a process starts or a file changes.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import UsageError
from ..model.vocab import (
    LOG_LEVELS,
    MAX_EXTRACT,
    POSTPROCESS_CHOICES,
    TRACKER_AUTO,
    TRACKER_FRESH,
    TRACKER_NONE,
)
from ..system import toolchain
from ..system.toolchain import RunIket
from . import outdir, patterns, targets
from .in_process import session
from .saved_calls import extract as extract_mod
from .saved_calls import replay
from .targets import Target
from .two_pass import trackers

_CLUSTER = re.compile(r"^\d+,\d+,\d+$")
_BUFFER = re.compile(r"^\d+[kKmMgG]?$")


@dataclass(frozen=True)
class Options:
    """Everything that shapes one capture besides the target and the output directory."""

    postprocess: str = "all"
    keep: bool = False
    clobber: bool = False
    timeout: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    python: str | None = None
    run_iket: str | None = None
    max_ts_cnt_per_warp: int | None = None
    warp_trace: bool = False
    enabled_cluster: str | None = None
    enabled_cluster_config: Path | None = None
    context_buffer_size: str | None = None
    log_level: str | None = None
    strict: bool = False  # exit 1 (CaptureError) when the passes drifted
    max_buffer: int | None = None  # bytes: stop before the capture pass if the buffer is larger
    overhead: bool = False  # also time the kernels without instrumentation (a --warp-trace run)
    warm: bool = True  # function targets: the second pass in a standby that imported torch (warm.py)
    keep_dsl_cache: bool = False  # leave CuTe DSL's compile cache on (see dsl_cache below)
    roles: Path | None = None  # warp roles (kernel_symbols.json) to keep with the capture
    tracker: str = TRACKER_AUTO  # auto | fresh | DIR: reuse a cached tracker pass (see trackers.py)
    repeat: int = 1  # capture passes after the one tracker pass (pipeline/repeats.py)
    command: list[str] | None = None  # the iket command line, recorded in the manifest
    extract: str | None = None  # MODULE:FUNC: record its calls in a plain run, capture a replay
    calls: str | int = "1"  # which calls --extract records: N, A-B or last
    max_extract: str | int = MAX_EXTRACT  # bytes the saved calls may take
    extract_rank: int = 0  # the rank whose process records (else the first to call FUNC)
    stop_after: bool = True  # end the record run once the last chosen call is saved
    replay: Path | None = None  # capture again from the calls saved in this capture
    trust_replay: bool = False  # --replay saved calls that this user did not record here
    window: str | None = None  # MODULE:FUNC: its chosen calls in an in-process session, one run
    one_pass: bool = False  # the whole run in one in-process session: no tracker pass, no relaunch
    hold_until_exit: bool = False  # the CLI: a stop signal after the publish waits for the exit (Publishing)

    def check(self) -> None:
        """Refuse inconsistent options before anything runs (exit 2)."""
        if self.postprocess not in POSTPROCESS_CHOICES:
            raise UsageError(
                f"unknown --postprocess {self.postprocess!r}",
                hint=f"use one of {', '.join(POSTPROCESS_CHOICES)}",
            )
        if self.log_level is not None and self.log_level not in LOG_LEVELS:
            raise UsageError(f"unknown --log-level {self.log_level!r}", hint=", ".join(LOG_LEVELS))
        if self.timeout is not None and self.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if self.max_ts_cnt_per_warp is not None and self.max_ts_cnt_per_warp <= 0:
            raise UsageError("--max-ts-cnt-per-warp must be a positive integer")
        if self.enabled_cluster is not None and not _CLUSTER.match(self.enabled_cluster):
            raise UsageError(
                f"--enabled-cluster {self.enabled_cluster!r} is not X,Y,Z",
                hint="e.g. --enabled-cluster 0,0,0",
            )
        if self.context_buffer_size is not None and not _BUFFER.match(self.context_buffer_size):
            raise UsageError(
                f"--context-buffer-size {self.context_buffer_size!r} is not a size",
                hint="a number of bytes, optionally with k, M or G: e.g. 512M",
            )
        if self.roles is not None and not Path(self.roles).is_file():
            raise UsageError(
                f"--roles {self.roles} does not exist", hint="give CuTe DSL's kernel_symbols.json"
            )
        trackers.check_choice(self.tracker)
        if isinstance(self.repeat, bool) or not isinstance(self.repeat, int) or self.repeat < 1:
            raise UsageError(
                f"--repeat {self.repeat!r} is not a positive whole number", hint="e.g. --repeat 5"
            )
        self._check_extract()
        config = self.enabled_cluster_config
        if config is not None and not Path(config).is_file():
            raise UsageError(f"--enabled-cluster-config {config} does not exist")
        if self.warp_trace and (self.enabled_cluster or config):
            raise UsageError("--enabled-cluster/--enabled-cluster-config cannot go with --warp-trace")
        if self.overhead and self.warp_trace:
            raise UsageError("--overhead compares against a --warp-trace run; drop --warp-trace")
        if self.overhead and self.postprocess not in ("json", "all"):
            raise UsageError(
                "--overhead reads the JSON traces", hint="use --postprocess json or --postprocess all"
            )
        if self.postprocess == "none" and not self.keep:
            raise UsageError(
                "--postprocess none without --keep would keep nothing of the capture",
                hint="add --keep (then decode later with iket postprocess DIR), or choose a format",
            )

    def _check_window(self) -> None:
        if self.window is not None and not str(self.window).strip():
            raise UsageError("--window '' names no function", hint="give MODULE:FUNC, or drop --window")
        ways = (
            ("--extract", bool(self.extract)),
            ("--replay", self.replay is not None),
            ("--window", bool(self.window)),
            ("--one-pass", self.one_pass),
        )
        chosen = [name for name, on in ways if on]
        if len(chosen) > 1:
            raise UsageError(
                f"{chosen[0]} and {chosen[1]} cannot go together", hint="choose one way to capture"
            )
        if not (self.window or self.one_pass):
            return
        if self.window and str(self.calls).strip().lower() == "last":
            raise UsageError(
                "--window cannot open at the last call: a window opens as its call begins",
                hint="give --calls N or A-B (iket says how many calls there were if N is too large)",
            )
        for name, on in (("--repeat", self.repeat != 1), ("--overhead", self.overhead),
                         ("--max-extract", self.max_extract != MAX_EXTRACT), ("--keep", self.keep),
                         ("--enabled-cluster-config", self.enabled_cluster_config is not None)):  # fmt: skip
            if on:
                raise UsageError(
                    f"{name} does not go with {chosen[0]}",
                    hint=f"{chosen[0]} runs the workload once, in-process",
                )

    def _check_extract(self) -> None:
        self._check_window()
        if self.window:
            return
        if self.extract is not None and not str(self.extract).strip():
            raise UsageError("--extract '' names no function", hint="give MODULE:FUNC, or drop --extract")
        if self.extract and self.replay is not None:
            raise UsageError(
                "--extract and --replay cannot go together", hint="--replay reuses DIR's FUNC and calls"
            )
        given = [
            name
            for name, on in (
                ("--calls", str(self.calls) != "1"),
                ("--extract-rank", self.extract_rank != 0),
                ("--no-stop-after", not self.stop_after),
                ("--max-extract", self.max_extract != MAX_EXTRACT),
            )
            if on
        ]
        if given and self.replay is not None:
            raise UsageError(
                f"{given[0]} does not go with --replay", hint="--replay replays DIR's saved calls"
            )
        if given and not self.extract:
            raise UsageError(
                f"{given[0]} needs --extract MODULE:FUNC", hint="add --extract, or drop the option"
            )
        if self.trust_replay and self.replay is None:
            raise UsageError("--trust-replay needs --replay DIR", hint="drop --trust-replay")


@dataclass(frozen=True)
class Plan:
    """One capture, resolved: every later step reads it, none changes it."""

    target: Target  # checked, with absolute paths
    options: Options
    cwd: Path  # the workload's working directory
    env: dict[str, str]  # this process's environment with --env applied
    python: str  # the interpreter of script, function and module targets
    tool: RunIket
    output_dir: Path  # absolute, checked (see outdir.check)
    #: What iket did about CuTe DSL's compile cache (see :func:`dsl_cache`): the manifest's record.
    dsl_cache: dict[str, str | None] = field(default_factory=dict)
    #: Where the tracker output comes from: a tracker pass, the cache, a DIR (see trackers.py).
    tracker: trackers.Tracker = field(default_factory=lambda: trackers.Tracker(TRACKER_FRESH))
    #: ``--extract`` or ``--replay``: the passes replay FUNC's saved calls (capture/saved_calls/extract.py).
    extract: extract_mod.Extract | None = None
    #: ``--window``: FUNC and the calls whose window the run opens (capture/in_process/child.py).
    window: extract_mod.Extract | None = None

    @property
    def in_process(self) -> bool:
        """``--window`` or ``--one-pass``: one run, its session in its own process."""
        return self.window is not None or self.options.one_pass

    @property
    def pass_target(self) -> Target:
        """What the passes run: the target, or the replay of FUNC's saved calls."""
        return extract_mod.REPLAY_TARGET if self.extract is not None else self.target

    @property
    def warm_target(self) -> Target:
        """Whose imports the warm standby makes early: the replay's are FUNC's module's."""
        source = self.extract.source if self.extract is not None else None
        return Target("function", f"{source}:{self.extract.qualname}") if source else self.pass_target

    @property
    def workload_argv(self) -> list[str]:
        """What run-iket runs in each pass (always through the shim)."""
        return self.pass_target.workload_argv(self.python)


def coerce_target(target_or_argv: str | os.PathLike | Sequence[str] | Target) -> Target:
    """A target from the API's argument: a string is a TARGET, a sequence is a command."""
    if isinstance(target_or_argv, Target):
        return target_or_argv
    if isinstance(target_or_argv, (str, os.PathLike)):
        return targets.parse("positional", [os.fspath(target_or_argv)])
    return targets.parse("command", [os.fspath(w) for w in target_or_argv])


def resolve(target: Target | None, output_dir: str | os.PathLike | None, options: Options) -> Plan:
    """Check everything that can be checked before a process starts; the resolved plan.

    ``target`` is None only with ``--replay`` (the target is the earlier capture's)."""
    options.check()
    cwd = Path(options.cwd or os.getcwd()).expanduser().resolve()
    if not cwd.is_dir():
        raise UsageError(f"--cwd {options.cwd} is not a directory")
    env = {**os.environ, **options.env}
    toolchain.refuse_foreign_injection(env)
    cache = dsl_cache(env, keep=options.keep_dsl_cache)
    python = options.python or sys.executable
    if shutil.which(python) is None:
        raise UsageError(f"--python {python} is not an executable", hint="give a path")
    extract = None
    if options.replay is not None:
        target, extract = replay.from_capture(
            Path(options.replay).expanduser(), cwd, env, options.trust_replay
        )
    elif target is None:
        raise UsageError("no target given", hint="iket profile script.py | -m module | -- COMMAND")
    else:
        target = targets.resolve(target, cwd=cwd, python=python, env=env)
    if options.extract:
        extract = extract_mod.resolve(
            options.extract,
            record=target,
            calls=options.calls,
            max_extract=options.max_extract,
            rank=options.extract_rank,
            stop_after=options.stop_after,
            cwd=cwd,
            python=python,
        )
    window = None
    if options.window:
        window = extract_mod.resolve(
            options.window, record=target, calls=options.calls, max_extract=options.max_extract,
            rank=options.extract_rank, stop_after=options.stop_after, cwd=cwd, python=python,
            option="--window",
        )  # fmt: skip
    if options.one_pass and target.kind == "command":
        raise UsageError(
            "--one-pass runs a Python workload's session in its own process; a command's cannot",
            hint="give a script, -m module or script.py:func, or capture the command with the two passes",
        )
    if options.window or options.one_pass:
        session.check_budget(options.max_ts_cnt_per_warp, "--max-ts-cnt-per-warp", env)
    tool = toolchain.find(options.run_iket, env)
    default = f"iket-{target.stem}" if extract is None or extract.replay_of is None else None
    if default is None:  # beside the capture it replays, named after it (``--replay .`` too)
        default = str(extract.replay_of.parent / f"{extract.replay_of.name}-replay")
    requested = Path(patterns.expand(os.fspath(output_dir or default), env=env))
    if options.replay is not None:
        replay.refuse_same(Path(options.replay).expanduser(), cwd / requested, cwd)
    checked = outdir.check(requested, cwd=cwd, clobber=options.clobber)
    if cache["set_by"] == "iket":
        env[NO_CACHE] = "1"
    plan = Plan(target, options, cwd, env, python, tool, checked, cache, extract=extract, window=window)
    if plan.in_process:
        return replace(plan, tracker=trackers.Tracker(TRACKER_NONE))
    found = trackers.key(tracker_key(plan))
    chosen = trackers.choose(options.tracker, warp_trace=options.warp_trace, found=found, env=env)
    return replace(plan, tracker=chosen)


def tracker_key(plan: Plan) -> dict[str, object]:
    """What determines the tracker pass (see capture/two_pass/trackers.py): the command and its arguments,
    the working directory, the relevant environment, Python, run-iket's version, the
    instrumentation options, and the content of the Python files the target names (an edited
    script is compiled anew)."""
    opts, target = plan.options, plan.target
    spec = target.spec.rsplit(":", 1)[0] if target.kind == "function" else target.spec
    scripts = [word for word in (spec, *target.args) if word.endswith(".py")]
    return {
        "argv": plan.workload_argv,
        "cwd": str(plan.cwd),
        # the ambient variables that matter, and every one given explicitly (--env, a job's env)
        "env": {**trackers.relevant(plan.env), **opts.env},
        "python": plan.python,
        "run_iket": plan.tool.version,
        "max_ts_cnt_per_warp": opts.max_ts_cnt_per_warp,
        "enabled_cluster": opts.enabled_cluster,
        "cluster_config": trackers.digest(opts.enabled_cluster_config),
        "context_buffer_size": opts.context_buffer_size,
        "target": [trackers.digest(plan.cwd / name) for name in scripts],
        "extract": None if plan.extract is None else plan.extract.key(),
    }


#: CuTe DSL loads a kernel it compiled before from its cache, without IKET's instrumentation
#: (a direct ``@cute.jit`` call does), and the capture comes back empty: the most common
#: CuTe DSL surprise. iket turns the cache off in both passes unless told otherwise.
NO_CACHE = "CUTE_DSL_NO_CACHE"


def dsl_cache(env: dict[str, str], *, keep: bool) -> dict[str, str | None]:
    """What to do about CuTe DSL's compile cache: the user's setting wins, then ``--keep-dsl-cache``.

    Harmless for other workloads (only CuTe DSL reads the variable), so it applies to
    every capture, a command's too, whose language iket cannot know.
    """
    if NO_CACHE in env:
        return {NO_CACHE: env[NO_CACHE], "set_by": "user"}
    if keep:
        return {NO_CACHE: None, "set_by": None}
    return {NO_CACHE: "1", "set_by": "iket"}
