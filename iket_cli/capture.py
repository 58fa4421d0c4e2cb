"""One capture, start to end: target → run-iket → staging → manifest → publish.

This is the Python API behind ``iket profile``; the click layer only parses options and
renders events. :func:`profile` returns a :class:`Capture` or raises an
:class:`~iket_cli.errors.IketError`; it never changes an existing output directory unless
the new capture succeeded (and then only with ``clobber=True``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import drift, labels, outdir, patterns, postprocess, runner, sysinfo, targets, toolchain, warm
from . import manifest as manifest_mod
from . import overhead as overhead_mod
from ._shim import STREAM_ENV
from .errors import (
    CaptureError,
    CaptureInterrupted,
    CaptureTimeout,
    IketError,
    MultiProcessError,
    NoInstrumentedKernelError,
    UsageError,
)
from .targets import Target

POSTPROCESS_CHOICES = ("perfetto", "json", "html", "all", "none")
LOG_LEVELS = ("error", "warn", "info")
INTERMEDIATES = ("tracker", "gen-config", "iket")
STATS_NAME = "run-iket.stats.json"

#: run-iket's console lines that mark the start of each pass (iket decodes afterwards).
PHASE_MARKERS = (
    ("Dry run application first", "tracker"),
    ("Run application for real profiling", "capture"),
)
_NO_KERNEL = "recommended_max_ts_cnt_per_warp is not found in tracker"
_TRACKER_FAILED = re.compile(r"Tracker failed with return code: (-?\d+)")
_PASS_FAILED = re.compile(r"exits abnormally with return code: (-?\d+) => Tool: (\w+)")
_CLUSTER = re.compile(r"^\d+,\d+,\d+$")
_BUFFER_LINE = re.compile(r"context buffer size: .*\(([\d,]+) bytes\)")
# The injection library aborts the capture pass with this when it records more than the
# tracker pass sized the buffer for (seen on the H200 with one extra launch in that pass).
_BUFFER_TOO_SMALL = re.compile(r"IKET trace buffer is too small.*?at least (\d+) bytes")
#: Bytes of JSON trace per byte of raw capture (keep256: 11.8 MB raw, 288 MB JSON).
JSON_PER_RAW_BYTE = 25
_BUFFER = re.compile(r"^\d+[kKmMgG]?$")

INSTRUMENT_HINT = (
    "instrument a kernel first: compile it with IketProfiler().compile(...) in TIRx, or use "
    "the iket ops in CuTe DSL; kernels loaded from a compile cache are not instrumented"
)


class Reporter:
    """What a capture tells its caller while it runs. The default says nothing."""

    def phase(self, name: str) -> None:
        """A phase started: ``tracker``, ``capture``, ``postprocess`` or ``publish``."""

    def output(self, line: str, *, tool: bool) -> None:
        """A line of output; ``tool`` is True for run-iket's own ``[run-iket]`` lines."""

    def warn(self, message: str, hint: str) -> None:
        """Something the user should know about a capture that still succeeded."""


@dataclass
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
    command: list[str] | None = None  # the iket command line, recorded in the manifest

    def check(self) -> None:
        """Refuse inconsistent options before anything runs (exit 2)."""
        if self.postprocess not in POSTPROCESS_CHOICES:
            raise UsageError(
                f"unknown --postprocess {self.postprocess!r}",
                hint=f"use one of {', '.join(POSTPROCESS_CHOICES)}",
            )
        if self.log_level is not None and self.log_level not in LOG_LEVELS:
            raise UsageError(f"unknown --log-level {self.log_level!r}", hint="error, warn, info")
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


@dataclass(frozen=True)
class Process:
    """One captured process and its artifacts (absolute paths; None where not produced)."""

    pid: int
    trace_json: Path | None
    perfetto: Path | None
    html: Path | None
    info: dict[str, Any]

    @property
    def pid_hex(self) -> str:
        return self.info["pid_hex"]


class Capture:
    """A published capture directory and its manifest."""

    def __init__(self, output_dir: Path, manifest: dict[str, Any]) -> None:
        self.output_dir = Path(output_dir)
        self.manifest = manifest

    @classmethod
    def load(cls, location: str | os.PathLike) -> Capture:
        """Open an existing capture directory (or its ``manifest.json``)."""
        path = Path(location)
        folder = path if path.is_dir() else path.parent
        return cls(folder, manifest_mod.read(path))

    @property
    def processes(self) -> list[Process]:
        result = []
        for info in self.manifest["processes"]:
            arts = info["artifacts"]

            def at(kind: str, arts: dict = arts) -> Path | None:
                return self.output_dir / arts[kind]["path"] if kind in arts else None

            result.append(Process(info["pid"], at("trace_json"), at("perfetto"), at("html"), info))
        return result

    @property
    def instrumented(self) -> list[Process]:
        """The processes that launched an instrumented kernel (see manifest.instrumented)."""
        wanted = manifest_mod.instrumented(self.manifest["processes"])
        return [p for p in self.processes if p.info in wanted]

    def _only(self, kind: str) -> Path:
        """The one process's artifact; processes that launched no instrumented kernel
        (a launcher that only initialised CUDA) do not count."""
        processes = self.instrumented
        if len(processes) != 1:
            raise MultiProcessError(
                f"this capture holds {len(processes)} processes, so it has no single {kind}",
                hint=f"use capture.processes[i].{kind} for each process",
            )
        path = getattr(processes[0], kind)
        if path is None:
            raise UsageError(
                f"this capture has no {kind}",
                hint="capture with postprocess='all' (or the format you need)",
            )
        return path

    @property
    def trace_json(self) -> Path:
        return self._only("trace_json")

    @property
    def perfetto(self) -> Path:
        return self._only("perfetto")

    @property
    def html(self) -> Path:
        return self._only("html")

    def __repr__(self) -> str:
        return f"Capture({str(self.output_dir)!r}, status={self.manifest['status']!r})"


def coerce_target(target_or_argv: str | Sequence[str] | Target) -> Target:
    """A target from the API's argument: a string is a TARGET, a sequence is a command."""
    if isinstance(target_or_argv, Target):
        return target_or_argv
    if isinstance(target_or_argv, (str, os.PathLike)):
        return targets.parse("positional", [os.fspath(target_or_argv)])
    words = [os.fspath(w) for w in target_or_argv]
    return targets.parse("command", words)


def profile(
    target_or_argv: str | Sequence[str] | Target,
    output_dir: str | os.PathLike | None = None,
    *,
    postprocess: str = "all",
    clobber: bool = False,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    reporter: Reporter | None = None,
    **options: Any,
) -> Capture:
    """Capture an IKET timeline of a script, a function, a module or any command.

    ``target_or_argv`` is ``"script.py"``, ``"script.py:func"``, ``"pkg.module:func"``, a
    :class:`~iket_cli.targets.Target`, or a command as a list (``["torchrun", ...]``).
    Further keyword options are the fields of :class:`Options` (``keep``, ``python``,
    ``run_iket``, ``max_ts_cnt_per_warp``, ``warp_trace``, ...).
    """
    opts = Options(
        postprocess=postprocess,
        clobber=clobber,
        timeout=timeout,
        env=dict(env or {}),
        cwd=Path(cwd) if cwd is not None else None,
        **options,
    )
    return Session(coerce_target(target_or_argv), output_dir, opts, reporter or Reporter()).run()


class Session:
    """The state of one ``profile`` call. Split from :func:`profile` to keep steps small."""

    def __init__(
        self, target: Target, output_dir: str | os.PathLike | None, opts: Options, reporter: Reporter
    ) -> None:
        self.target = target
        self.requested_dir = output_dir
        self.opts = opts
        self.reporter = reporter
        self.phase = "setup"
        self.run_iket_s: float | None = None
        self.postprocess_s: float | None = None
        self.device_buffer: int | None = None
        self.overhead: dict[str, Any] | None = None
        self.warm: dict[str, Any] | None = None
        self.stop = threading.Event()

    # -- preparation: everything here runs before any process starts ------------------
    def prepare(self) -> None:
        opts = self.opts
        opts.check()
        self.cwd = Path(opts.cwd or os.getcwd()).expanduser().resolve()
        if not self.cwd.is_dir():
            raise UsageError(f"--cwd {opts.cwd} is not a directory")
        self.env = {**os.environ, **opts.env}
        toolchain.refuse_foreign_injection(self.env)
        self.python = opts.python or sys.executable
        if shutil.which(self.python) is None:
            raise UsageError(f"--python {self.python} is not an executable", hint="give a path")
        self.target = targets.resolve(self.target, cwd=self.cwd, python=self.python, env=self.env)
        self.tool = toolchain.find(opts.run_iket, self.env)
        requested = Path(
            patterns.expand(os.fspath(self.requested_dir or f"iket-{self.target.stem}"), env=self.env)
        )
        self.output_dir = outdir.check(requested, cwd=self.cwd, clobber=opts.clobber)

    def run_iket_argv(self, capture_dir: Path) -> list[str]:
        opts = self.opts
        argv = self._run_iket_head(capture_dir)
        # iket decodes the raw captures itself (in parallel: see postprocess.py), so run-iket
        # only runs the passes and keeps what they wrote.
        argv += ["profile", "--postprocess", "none", "--keep", "--enable-stats"]
        if opts.max_ts_cnt_per_warp is not None:
            argv += ["--max-ts-cnt-per-warp", str(opts.max_ts_cnt_per_warp)]
        if opts.warp_trace:
            argv.append("--warp-trace")
        if opts.enabled_cluster:
            argv += ["--enabled-cluster", opts.enabled_cluster]
        if opts.enabled_cluster_config:
            argv += ["--enabled-cluster-config", str(Path(opts.enabled_cluster_config).resolve())]
        return [*argv, "--", *self.target.workload_argv(self.python)]

    def overhead_argv(self, plain_dir: Path) -> list[str]:
        """The --overhead run: warp lifetimes only, no kernel body patched, JSON decoded by run-iket."""
        argv = self._run_iket_head(plain_dir)
        argv += ["profile", "--postprocess", "json", "--warp-trace", "--enable-stats"]
        if self.opts.keep:
            argv.append("--keep")
        return [*argv, "--", *self.target.workload_argv(self.python)]

    def _run_iket_head(self, output_dir: Path) -> list[str]:
        opts = self.opts
        argv = [self.tool.path, "--output-dir", str(output_dir), "--working-dir", str(self.cwd)]
        if opts.log_level:
            argv += ["--log-level", opts.log_level]
        if opts.context_buffer_size:
            argv += ["--context-buffer-size", opts.context_buffer_size]
        return argv

    # -- the run ------------------------------------------------------------------------
    def run(self) -> Capture:
        self.prepare()
        with outdir.Lock(self.output_dir):
            self.staging = outdir.Staging(self.output_dir)
            try:
                return self._attempt()
            except BaseException:
                self.staging.discard()  # a no-op once fail() or publish() moved it away
                raise

    def _attempt(self) -> Capture:
        self.started = datetime.now(timezone.utc)
        self.t0 = time.monotonic()
        gpus = sysinfo.GpuQuery()
        formats = manifest_mod.formats_for(self.opts.postprocess)
        if formats:  # load the decoder while the passes run, not after them
            threading.Thread(target=postprocess.preload, daemon=True).start()
        argv = self.run_iket_argv(self.staging.capture_dir)
        self.argv = argv
        with open(self.staging.log_path, "w", encoding="utf-8", errors="replace") as log:
            log.write(f"# {' '.join(self.opts.command or ['iket_cli.profile(...)'])}\n")
            log.write(f"# run-iket command: {_quote(argv)}\n")
            self.log = log
            os.mkfifo(self._fifo)
            result = self._warm_pass(argv, gpus)
        self.run_iket_s = round(result.duration_s, 3)
        if result.returncode != 0:
            raise self._failed(self._classify(result), "failed", gpus.result())
        with open(self.staging.log_path, "a", encoding="utf-8", errors="replace") as log:
            self.log = log
            try:
                self._decode(formats)
            except CaptureError as error:
                log.close()
                status = "interrupted" if isinstance(error, CaptureInterrupted) else "failed"
                raise self._failed(error, status, gpus.result()) from None
            if self.opts.overhead:
                self._measure_overhead(gpus)
        return self._succeeded(gpus.result())

    @property
    def _fifo(self) -> Path:
        """Where the shim sends the workload's output live (see ``_shim.STREAM_ENV``)."""
        return self.staging.root / "workload.fifo"

    def _warm_pass(self, argv: list[str], gpus: sysinfo.GpuQuery) -> runner.RunResult:
        """The tracker and capture passes, with a warm standby beside them where it helps."""
        procs = self.staging.root / labels.PROCS_NAME
        standby = warm.standby_for(
            self.target, self.cwd, self.staging.root / warm.LOG_NAME, enabled=self.opts.warm
        )
        if standby is None:
            return self._pass(argv, gpus, procs)
        extra = standby.start(self.python, self._pass_env(procs), self.cwd)
        try:
            return self._pass(argv, gpus, procs, extra)
        finally:
            self.warm = standby.close()

    def _pass_env(self, procs: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of run-iket and the passes (``extra``: the standby's socket)."""
        env = {**self.tool.child_env(self.env), STREAM_ENV: str(self._fifo), **(extra or {})}
        return labels.hook_env(env, procs)

    def _pass(
        self, argv: list[str], gpus: sysinfo.GpuQuery, procs: Path, extra: dict[str, str] | None = None
    ) -> runner.RunResult:
        """Run one run-iket command, streaming into the log; a stop becomes DIR.failed/."""
        env = self._pass_env(procs, extra)
        timeout = self.opts.timeout
        if timeout is not None:  # one budget for the whole capture, --overhead run included
            timeout = max(timeout - (time.monotonic() - self.t0), 0.001)
        try:
            return runner.run_streaming(
                argv,
                env=env,
                cwd=self.cwd,
                on_line=self._on_line,
                timeout=timeout,
                side_stream=self._fifo,
                stop=self.stop,
            )
        except runner.Stopped as stopped:
            self.log.close()
            raise self._failed(self._over_budget(stopped.tail), "failed", gpus.result()) from None
        except (CaptureTimeout, CaptureInterrupted) as stop:
            status = "timeout" if isinstance(stop, CaptureTimeout) else "interrupted"
            if status == "timeout":  # name the user's --timeout, not what was left of it
                stop.message = f"timed out after {self.opts.timeout:g} s; the whole process tree was killed"
            self.log.write(f"# {stop.message}\n")
            self.log.close()
            raise self._failed(stop, status, gpus.result()) from None

    def _measure_overhead(self, gpus: sysinfo.GpuQuery) -> None:
        """Time the kernels once more without instrumentation; a failure here only warns.

        The capture itself is complete and valid by now, so a failed comparison run is
        recorded in the manifest (``overhead.error``) instead of failing the capture.
        """
        self.phase = "overhead"
        self.reporter.phase("overhead")
        plain = self.staging.root / overhead_mod.OVERHEAD_DIR
        argv = self.overhead_argv(plain)
        self.log.write(f"# --overhead run: {_quote(argv)}\n")
        result = self._pass(argv, gpus, self.staging.root / "overhead-processes.jsonl")
        record: dict[str, Any] = {"run_iket_s": round(result.duration_s, 3), "kernels": [], "error": None}
        if result.returncode != 0:
            tail = [line for line in result.tail if not _is_noise(line)][-1:]
            record["error"] = f"the --warp-trace run failed with status {result.returncode}: {' '.join(tail)}"
        else:
            try:
                record["kernels"] = overhead_mod.measure(self.staging.capture_dir, plain)
            except IketError as error:
                record["error"] = f"could not read the --warp-trace run's traces: {error.message}"
            if not record["kernels"] and record["error"] is None:
                record["error"] = "the --warp-trace run recorded none of the instrumented kernels"
        if record["error"]:
            self.reporter.warn(
                f"--overhead: {record['error']}", f"the run's output is in {manifest_mod.LOG_NAME}"
            )
        if self.opts.keep and plain.is_dir():
            os.replace(plain, self.staging.capture_dir / overhead_mod.OVERHEAD_DIR)
        self.overhead = record

    def _decode(self, formats: list[str]) -> None:
        """Decode every process's raw capture into the requested artifacts, in parallel."""
        tasks = postprocess.plan(self.staging.capture_dir, formats)
        if not tasks:
            return  # nothing was captured: _missing_artifacts says so
        self.phase = "postprocess"
        self.reporter.phase("postprocess")
        start = time.monotonic()
        outcomes = postprocess.run(tasks, progress=_LoggedProgress(self))
        self.postprocess_s = round(time.monotonic() - start, 3)
        errors = list(dict.fromkeys(o.error for o in outcomes if o.error))
        if errors:
            raise CaptureError(f"decoding failed: {errors[0]}", phase="postprocess", details=errors[1:])

    def _on_line(self, line: str) -> None:
        self.log.write(line + "\n")
        tool = line.startswith(("[run-iket]", "[iket]"))
        if self.phase == "overhead":  # the --warp-trace run: its passes are not the capture's
            self.reporter.output(line, tool=tool)
            return
        announced = _BUFFER_LINE.search(line) if tool else None
        if announced:
            self.device_buffer = int(announced.group(1).replace(",", ""))
            if self.opts.max_buffer is not None and self.device_buffer > self.opts.max_buffer:
                self.stop.set()  # before the capture pass allocates it
        if tool:
            for marker, phase in PHASE_MARKERS:
                if marker in line and phase != self.phase:
                    self.phase = phase
                    self.reporter.phase(phase)
        self.reporter.output(line, tool=tool)

    def _over_budget(self, tail: list[str]) -> CaptureError:
        size, limit = self.device_buffer or 0, self.opts.max_buffer or 0
        return CaptureError(
            f"run-iket would allocate a {human_bytes(size)} trace buffer, over --max-buffer "
            f"{human_bytes(limit)}; stopped before the capture pass",
            phase="capture",
            hint="capture fewer clusters (--enabled-cluster X,Y,Z or --enabled-cluster-config), "
            "fewer timestamps per warp (--max-ts-cnt-per-warp), or fewer launches",
            details=[line for line in tail if not _is_noise(line)][-5:],
        )

    def _classify(self, result: runner.RunResult) -> CaptureError:
        """Turn run-iket's exit and last lines into one clear error."""
        text = "\n".join(result.tail)
        details = [line for line in result.tail if not _is_noise(line)][-15:]
        if _NO_KERNEL in text:
            return NoInstrumentedKernelError(
                "the workload launched no IKET-instrumented kernel (the tracker pass saw none)",
                phase="tracker",
                hint=INSTRUMENT_HINT,
                details=details,
            )
        tracker = _TRACKER_FAILED.search(text)
        if tracker:
            return CaptureError(
                f"the workload exited with status {_status(tracker.group(1))} in the tracker pass",
                phase="tracker",
                details=details,
            )
        failed_pass = _PASS_FAILED.search(text)
        too_small = _BUFFER_TOO_SMALL.search(text)
        if too_small:
            sized = ""
            if self.device_buffer:
                sized = f", sized from the tracker pass at {self.device_buffer:,} bytes"
            return CaptureError(
                "the capture pass recorded more than the tracker pass: its trace buffer needed at "
                f"least {int(too_small.group(1)):,} bytes{sized}, and the workload was aborted",
                phase="capture",
                hint=f"{drift.HINT}; or give --context-buffer-size {too_small.group(1)} to capture anyway",
                details=details,
            )
        if failed_pass and failed_pass.group(2) == "iket":
            return CaptureError(
                f"the workload exited with status {_status(failed_pass.group(1))} in the capture pass",
                phase="capture",
                hint="a workload that passes the tracker pass but fails the capture pass often "
                "launches different kernels or event counts in the two passes",
                details=details,
            )
        return CaptureError(
            f"run-iket failed with status {result.returncode} during the {self.phase} phase",
            phase=self.phase,
            details=details,
        )

    # -- endings --------------------------------------------------------------------------
    def _failed(self, error: IketError, status: str, gpus: list) -> IketError:
        """Keep the evidence in DIR.failed/ and return ``error`` pointing at it."""
        capture = self.staging.finalize()
        try:
            processes = manifest_mod.scan_processes(capture)
        except OSError:
            processes = []
        record = self._manifest(status, processes, gpus, error=error)
        manifest_mod.write(capture, record)
        where = self.staging.fail()
        error.failed_dir = where
        note = f"evidence kept in {where}"
        error.hint = f"{error.hint}; {note}" if error.hint else note
        return error

    def _succeeded(self, gpus: list) -> Capture:
        self.phase = "publish"
        self.reporter.phase("publish")
        capture = self.staging.finalize()
        processes = manifest_mod.scan_processes(capture)
        formats = manifest_mod.formats_for(self.opts.postprocess)
        if "html" in formats and processes:
            processes = self._reports(capture, processes, gpus, formats)
        missing = self._missing_artifacts(processes)
        if missing:
            error = CaptureError(missing, phase="postprocess")
            raise self._failed(error, "failed", gpus)
        drifted = drift.check(capture)  # needs the intermediates: before they go
        if drifted:
            with open(capture / manifest_mod.LOG_NAME, "a", encoding="utf-8") as log:
                log.writelines(f"[iket] pass drift: {problem}\n" for problem in drifted)
        if not self.opts.keep:
            for name in INTERMEDIATES:
                shutil.rmtree(capture / name, ignore_errors=True)
            for process in processes:
                process["raw"] = None
        record = self._manifest("suspect" if drifted else "ok", processes, gpus)
        record["drift"] = drifted
        record["lint"] = _lint(capture, processes)
        for finding in record["lint"]:
            self.reporter.warn(
                f"pid {finding['process']}: [{finding['code']}] {finding['message']}", finding["hint"]
            )
        manifest_mod.write(capture, record)
        published = self.staging.publish()
        result = Capture(published, record)
        if drifted:
            self.reporter.warn(f"the passes differ, the capture is suspect: {drifted[0]}", drift.HINT)
            if self.opts.strict:
                raise CaptureError(
                    f"the tracker and capture passes differ ({len(drifted)} difference(s)): {drifted[0]}",
                    phase="capture",
                    hint=f"{drift.HINT}; the capture is in {published}, marked suspect",
                    details=drifted[1:],
                )
        return result

    def _reports(self, capture: Path, processes: list, gpus: list, formats: list[str]) -> list:
        """The offline HTML report of each process; its time counts as postprocessing."""
        start = time.monotonic()
        try:
            processes = postprocess.finish_html(capture, self._manifest("ok", processes, gpus), formats)
        except IketError as error:
            failure = CaptureError(f"the HTML report failed: {error.message}", phase="postprocess")
            raise self._failed(failure, "failed", gpus) from None
        self.postprocess_s = round((self.postprocess_s or 0) + time.monotonic() - start, 3)
        return processes

    def _missing_artifacts(self, processes: list[dict[str, Any]]) -> str | None:
        kinds = manifest_mod.artifacts_for(manifest_mod.formats_for(self.opts.postprocess))
        if not kinds:
            return None
        if not processes:
            return "the capture pass produced no trace: no process ran an instrumented kernel"
        for process in processes:
            for kind in kinds:
                if kind not in process["artifacts"]:
                    return f"run-iket wrote no {kind} for process {process['pid_hex']}"
        return None

    def _manifest(
        self, status: str, processes: list, gpus: list, error: IketError | None = None
    ) -> dict[str, Any]:
        labels.attach(processes, self.staging.root / labels.PROCS_NAME)
        finished = datetime.now(timezone.utc)
        stats = self.staging.capture_dir / STATS_NAME
        return {
            "schema_version": manifest_mod.SCHEMA_VERSION,
            "status": status,
            "error": None if error is None else _error_record(error),
            "target": {**self.target.to_dict(), "display": self.target.describe()},
            "command": self.opts.command,
            "argv": self.target.workload_argv(self.python),
            "run_iket_argv": self.argv,
            "cwd": str(self.cwd),
            "started_at": self.started.isoformat(timespec="milliseconds"),
            "finished_at": finished.isoformat(timespec="milliseconds"),
            "duration_s": round(time.monotonic() - self.t0, 3),
            "phases": {
                **manifest_mod.phases_from_stats(stats),
                "postprocess": self.postprocess_s,
                "run_iket": self.run_iket_s,
                "overhead": None if self.overhead is None else self.overhead["run_iket_s"],
            },
            "versions": sysinfo.versions(self.tool.version, gpus),
            "postprocess": manifest_mod.formats_for(self.opts.postprocess),
            "trace_budget": {
                "device_buffer_bytes": self.device_buffer,
                "max_buffer_bytes": self.opts.max_buffer,
                "estimated_json_bytes_max": None
                if self.device_buffer is None
                else self.device_buffer * JSON_PER_RAW_BYTE,
            },
            "keep": self.opts.keep,
            "overhead": self.overhead,
            "warm": self.warm,
            "log": manifest_mod.LOG_NAME,
            "processes": processes,
        }


class _LoggedProgress(postprocess.Progress):
    """Decode progress as ``[iket]`` lines: in the log, and on the console with -v."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def finished(self, outcome: postprocess.Outcome) -> None:
        task = outcome.task
        verdict = f"failed: {outcome.error}" if outcome.error else f"in {outcome.seconds:.2f} s"
        self.session._on_line(f"[iket] decoded pid {task.pid_hex} {task.export} {verdict}")


def _error_record(error: IketError) -> dict[str, Any]:
    return {
        "type": type(error).__name__,
        "message": error.message,
        "phase": getattr(error, "phase", None),
        "exit_code": int(error.exit_code),
    }


#: Traces up to this size are linted right after the capture (larger ones: run iket lint).
LINT_MAX_BYTES = 64 << 20


def _lint(capture: Path, processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Instrumentation findings for each process whose JSON trace is small enough to read now."""
    from . import lint
    from . import trace as trace_mod

    findings = []
    for process in processes:
        artifact = process["artifacts"].get("trace_json")
        if artifact and artifact["bytes"] <= LINT_MAX_BYTES:
            try:
                loaded = trace_mod.load(capture / artifact["path"])
            except IketError:
                continue  # an unreadable trace is `iket show`'s to report
            findings += [{"process": process["pid_hex"], **f.to_dict()} for f in lint.lint(loaded)]
    return findings


def human_bytes(size: int) -> str:
    """``5.8 KiB``, ``2.0 GiB``: sizes in the binary units run-iket's options use."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def parse_size(text: str) -> int:
    """``512M``, ``2G``, ``4096`` -> bytes (k, M, G are powers of 1024, as run-iket's)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)[iI]?[bB]?\s*", text)
    if not match:
        raise UsageError(f"{text!r} is not a size", hint="a number of bytes, optionally with k, M or G")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(match.group(1)) * scale


def _status(code: str) -> str:
    """``5``, or ``-6 (SIGABRT)`` for a workload killed by a signal."""
    number = int(code)
    if number < 0:
        try:
            return f"{number} ({signal.Signals(-number).name})"
        except ValueError:
            pass
    return str(number)


def _is_noise(line: str) -> bool:
    """run-iket's stats summary and advice lines, which bury the real failure."""
    body = line.removeprefix("[run-iket]").strip()
    return line.startswith("[run-iket]  ") or body.startswith(("run-iket stats", "Re-run the same"))


def _quote(argv: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)
