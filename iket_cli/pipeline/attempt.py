"""One capture attempt's record: what its steps found, its log, the manifest built from it, and the
evidence it leaves in ``DIR.failed/`` when it fails.

The evidence is kept whatever went wrong, a full disk included: then the bulky parts of the
attempt (the raw capture, half-written artifacts) are dropped first, so that the log, and
the manifest where it fits, are kept.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..capture import runiket
from ..capture.events import Reporter
from ..capture.plan import Plan
from ..capture.staging import Staging, failed_dir
from ..capture.two_pass.passes import PassResult, Transcript
from ..errors import DiskFullError, IketError, InjectionCrash
from ..model import artifacts, jsonio, labels, runiket_facts
from ..model import manifest as manifest_mod
from ..model import record as record_mod
from ..model.completeness import Completeness
from ..model.names import Namer
from ..model.vocab import (
    DAG_SUFFIX,
    DUMP_DIR_ENV,
    INSTRUMENTED,
    JSON_PER_RAW_BYTE,
    LOG_NAME,
    PROCS_NAME,
    ROLES_NAME,
    STATS_NAME,
    WARP_TRACE,
    formats_for,
)
from ..system import filesystem, machine, spawn


@dataclass(frozen=True)
class Attempt:
    """What every step of one capture attempt reads, built once as its log opens: the plan
    (rechosen once by --extract's record run: a new value), the staging folder, the log,
    the deadline of --timeout and the cancel event of ``iket run``."""

    plan: Plan
    staging: Staging
    transcript: Transcript
    deadline: float | None
    cancel: threading.Event | None


@dataclass(frozen=True)
class Facts:
    """What an attempt has learned so far: each step's result. The manifest is built from it."""

    started: datetime
    t0: float
    run_iket_argv: list[str]
    gpus: machine.GpuQuery
    passes: PassResult | None = None
    postprocess_s: float | None = None
    overhead: dict[str, Any] | None = None
    drift: list[str] = field(default_factory=list)
    annotations: dict[str, Any] | None = None  # what CuTe DSL wrote beside the trace (collect_annotations)
    repeats: list | None = None  # --repeat N: pipeline.repeats.Repeat, repeat 1 first
    extract: dict[str, Any] | None = None  # --extract/--replay: the saved calls (saved_calls/extract.py)
    completeness: Completeness | None = None  # what the capture lost (pipeline/completeness.py)
    window: dict[str, Any] | None = (
        None  # --window/--one-pass: the run and its session (pipeline/in_process.py)
    )

    @classmethod
    def begin(cls, argv: list[str], t0: float | None = None) -> Facts:
        """``t0``: when the capture began (a rerun after a reused tracker pass did not fit
        keeps the first attempt's, so ``--timeout`` bounds both)."""
        return cls(datetime.now(timezone.utc), t0 or time.monotonic(), argv, machine.GpuQuery())

    def needed_bytes(self, formats: list[str]) -> int | None:
        """About how much disk the capture takes: the raw capture and its artifacts."""
        buffer = self.passes.device_buffer if self.passes else None
        return None if buffer is None else runiket.estimated_bytes(buffer, formats)


def manifest(
    plan: Plan,
    staging: Staging,
    facts: Facts,
    status: str,
    processes: list[dict[str, Any]],
    error: IketError | None = None,
    gpus: list[dict[str, str]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The manifest of this attempt as it stands (labels attached to ``processes``);
    with ``gpus`` given, the GPU query is not waited for."""
    labels.attach(processes, staging.root / PROCS_NAME)
    ran = facts.passes
    buffer = ran.device_buffer if ran else None
    return record_mod.build(
        status=status,
        mode=WARP_TRACE if plan.options.warp_trace else INSTRUMENTED,
        error=error,
        target={**plan.target.to_dict(), "display": plan.target.describe()},
        command=plan.options.command,
        argv=plan.workload_argv,
        run_iket_argv=facts.run_iket_argv,
        cwd=str(plan.cwd),
        started_at=facts.started,
        finished_at=datetime.now(timezone.utc),
        duration_s=round(time.monotonic() - facts.t0, 3),
        phases={
            **({"record": (facts.extract.get("record") or {}).get("seconds")} if facts.extract else {}),
            **(
                {"run": facts.window.get("run_s"), "window": facts.window.get("window_s")}
                if facts.window
                else {}
            ),
            **artifacts.phases_from_stats(staging.capture_dir / STATS_NAME),
            "postprocess": facts.postprocess_s,
            "run_iket": round(ran.duration_s, 3) if ran and ran.error is None else None,
            "overhead": None if facts.overhead is None else facts.overhead["run_iket_s"],
        },
        versions=machine.versions(plan.tool.version, facts.gpus.result() if gpus is None else gpus),
        postprocess=formats_for(plan.options.postprocess),
        keep=plan.options.keep,
        trace_budget={
            "device_buffer_bytes": buffer,
            "max_buffer_bytes": plan.options.max_buffer,
            "estimated_json_bytes_max": None if buffer is None else buffer * JSON_PER_RAW_BYTE,
        },
        overhead=facts.overhead,
        warm=ran.warm if ran else None,
        dsl_cache=plan.dsl_cache,
        annotations=facts.annotations,
        tracker=plan.tracker.record(),
        repeats=None if not facts.repeats else [r.record() for r in facts.repeats],
        extract=facts.extract,
        window=facts.window,
        completeness=None if facts.completeness is None else facts.completeness.to_dict(),
        processes=processes,
        **extra,
    )


def keep_evidence(
    plan: Plan, staging: Staging, facts: Facts, error: IketError, unwritten: Iterable[str] = ()
) -> IketError:
    """Keep the attempt's evidence in DIR.failed/ and return ``error`` pointing at it.

    ``unwritten`` are log lines a full disk refused; they are added once room is made.
    Nothing here raises for the file system: what cannot be written is left out.
    """
    if isinstance(error, InjectionCrash):
        _known_cause(error, staging.root / PROCS_NAME)
    with contextlib.suppress(OSError, IketError):
        capture = staging.finalize()
        if isinstance(error, DiskFullError):
            _make_room(capture)
            first = [] if (capture / LOG_NAME).exists() else [f"iket: error: {error}"]
            _append_log(capture, [*first, *unwritten])
        try:
            processes = artifacts.scan_processes(capture)
        except OSError:
            processes = []
        record = manifest(plan, staging, facts, error.manifest_status, processes, error=error)
        manifest_mod.write(capture, record)
    try:
        where = staging.fail()
    except OSError:
        return error  # nowhere to keep it: the message is all there is
    if where is None:
        note = (
            f"no evidence kept: {failed_dir(plan.output_dir)} is not a failed capture's evidence, "
            "so it was left as it is (move it away to keep the next failure's)"
        )
    else:
        error.failed_dir = where
        note = f"evidence kept in {where}"
        _moved(error, staging.capture_dir, where)
        if isinstance(error, InjectionCrash):
            error.details += [*launched_before(where), *injection_warnings(where), *probed(plan, facts)]
    error.hint = f"{error.hint}; {note}" if error.hint else note
    return error


def _moved(error: IketError, staging: Path, where: Path) -> None:
    """The staging folder a message names is gone: name the same file in ``DIR.failed/``."""
    error.message = error.message.replace(str(staging), str(where))
    error.details = [line.replace(str(staging), str(where)) for line in error.details]


def _known_cause(error: InjectionCrash, procs_file: Path) -> None:
    """Where the kernels compiled token ranges whose two ends carry different payloads, say so
    first and say what to change (instead of the GEMM hint): a known cause of the crash."""
    with contextlib.suppress(OSError, ValueError):
        unmatched = labels.unmatched_payloads(procs_file)
        if unmatched:
            said = "; ".join(unmatched)
            error.details.insert(0, f"token ranges whose two ends carry different payloads: {said}")
            error.hint = UNMATCHED_PAYLOAD_HINT


#: What to do about :func:`labels.unmatched_payloads` (instead of the GEMM hint).
UNMATCHED_PAYLOAD_HINT = (
    "give range_end the payload its range_start has (iket.range_end(token, payload), same type): "
    f"CuTe DSL requires it, and run-iket {runiket_facts.LATEST.release}'s capture pass dies without it "
    "(docs/faults.md: "
    "When run-iket itself fails)"
)


def launched_before(folder: Path, count: int = 4) -> list[str]:
    """What run-iket recorded of the kernels launched before a crash: the tracker pass's launch
    list (``tracker/pid_*/tracker.json``), one line. On the H200 a process killed by the
    injection leaves neither it nor a raw capture, and the line says so."""
    counts: Counter = Counter()
    for listing in sorted(folder.glob("tracker/pid_*/tracker.json")):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            for launch in jsonio.read(listing)["launches"]:
                counts[str(launch["kernelName"])] += 1
    if not counts:
        return ["launched before: nothing recorded (run-iket wrote no launch list before the crash)"]
    namer = Namer(counts)
    named = ", ".join(f"{namer(name)} x{n}" for name, n in counts.most_common(count))
    more = f" and {len(counts) - count} more kernel(s)" if len(counts) > count else ""
    return [f"launched before: {named}{more}"]


def probed(plan: Plan, facts: Facts) -> list[str]:
    """What ``iket doctor --gpu`` found for this stack, if it ran here: one line, or a pointer."""
    from ..capture import probes

    with contextlib.suppress(Exception):  # a diagnosis's extra line never hides the error
        table = probes.cached(plan.env, probes.stack(plan.tool.version, facts.gpus.result()))
        if table is not None:
            return [probes.summary(table)]
    return ["iket doctor --gpu: not run on this stack yet (it names what this run-iket survives)"]


#: A warning the injection logs in every process on the H100 (driver 580),
#: whatever it runs: no diagnosis.
BENIGN = "IKET could not enable optional CUDA compatibility support"


def injection_warnings(folder: Path, count: int = 4) -> list[str]:
    """The last distinct warning and error lines of the injection logs run-iket left in
    ``folder`` (``tracker/pid_*/`` and ``iket/pid_*/iket.injection.log``; iket runs the
    injection at ``info``), but the one every process logs on the H100 (:data:`BENIGN`)."""
    found: list[str] = []
    for log in sorted(folder.glob("*/pid_*/iket.injection.log")):
        with contextlib.suppress(OSError):
            for line in log.read_text(errors="replace").splitlines():
                if BENIGN in line:
                    continue
                if ("[warning]" in line or "[error]" in line) and line.strip() not in found:
                    found.append(line.strip())
    return [f"injection log: {line}" for line in found[-count:]]


def _make_room(capture) -> None:
    """On a full disk: drop everything but the logs (the raw capture, partial artifacts)."""
    for entry in list(capture.iterdir()):
        if entry.suffix == ".log":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _append_log(capture, lines: Iterable[str]) -> None:
    lines = list(lines)
    if lines:
        with open(capture / LOG_NAME, "a", encoding="utf-8", errors="replace") as log:
            log.write("# (written after a full disk made room)\n")
            log.writelines(line + "\n" for line in lines)


def collect_annotations(plan: Plan, staging: Staging, since: float) -> dict[str, Any] | None:
    """CuTe DSL's ``kernel_symbols.json`` and ``*.iket_dag.json`` that the workload wrote during
    this capture (into ``CUTE_DSL_DUMP_DIR`` or its working directory), copied into the capture;
    ``--roles FILE`` wins over a ``kernel_symbols.json`` found."""
    folders = [plan.cwd]
    if plan.env.get(DUMP_DIR_ENV):
        folders.insert(0, plan.cwd / plan.env[DUMP_DIR_ENV])
    found: dict[str, Path] = {}
    for folder in folders:
        for path in [folder / ROLES_NAME, *sorted(folder.glob(f"*{DAG_SUFFIX}"))]:
            if path.name not in found and path.is_file() and path.stat().st_mtime >= since - 1:
                found[path.name] = path
    if plan.options.roles is not None:
        found[ROLES_NAME] = Path(plan.options.roles)
    if not found:
        return None
    for name, path in found.items():
        shutil.copyfile(path, staging.capture_dir / name)
    return {
        "roles": ROLES_NAME if ROLES_NAME in found else None,
        "dags": sorted(name for name in found if name.endswith(DAG_SUFFIX)),
        "sources": {name: str(path) for name, path in found.items()},
    }


def explained(
    error: BaseException, plan: Plan, facts: Facts, formats: list[str], transcript: Transcript | None
) -> IketError:
    """The error to report: a full disk is named as such, whoever met it first."""
    full = transcript is not None and transcript.full is not None
    said = "\n".join(line.text for line in facts.passes.tail) if facts.passes else ""
    if full or filesystem.is_full(error) or any(text in said for text in _DISK_FULL_TEXT):
        return filesystem.disk_full(plan.output_dir.parent, facts.needed_bytes(formats))
    if isinstance(error, OSError):
        return filesystem.from_os_error(error, plan.output_dir.parent)
    return error


#: How a full disk reads in run-iket's (or the decoder's) output.
_DISK_FULL_TEXT = ("No space left on device", "Disk quota exceeded")


@contextlib.contextmanager
def logged(staging: Staging, plan: Plan, argv: list[str], reporter: Reporter) -> Iterator[Transcript]:
    """The attempt's ``iket.log``, opened and closed here, and nowhere else."""
    # Line-buffered: a full disk refuses a whole line, which the transcript then keeps.
    with open(staging.log_path, "w", encoding="utf-8", errors="replace", buffering=1) as log:
        transcript = Transcript(log, reporter)
        transcript.note(" ".join(plan.options.command or ["iket_cli.profile(...)"]))
        transcript.note(f"run-iket command: {spawn.quote(argv)}")
        if plan.tracker.rerun:
            transcript.note(
                f"captured again with a tracker pass, the cached one did not fit: {plan.tracker.rerun}"
            )
        yield transcript
