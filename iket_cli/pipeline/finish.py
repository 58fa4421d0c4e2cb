"""After decoding: each JSON trace loaded once, linted, and made into its report; only then
are the JSON traces that were made just for the report removed.

``iket profile`` and ``iket postprocess`` both end here, so a capture's lint findings are
recorded whatever its formats (a trace too big to lint cheaply is skipped unless its report
needs it loaded anyway), and nothing is removed before every reader of it has run.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis import flows as flows_mod
from ..analysis import lint as lint_mod
from ..analysis import summary as summary_mod
from ..decode.tasks import MOST_TRACES, find_raw
from ..errors import IketError
from ..model import annotations, artifacts, atomic, completeness, pftrace, rawevents
from ..model import trace as trace_mod
from ..model.annotations import Dag, Roles
from ..model.folder import mode_of
from ..model.vocab import artifact_name, pid_of, raw_manifest
from ..render import report as report_mod

#: Without a report to build, traces up to this size are linted (larger ones: run iket lint).
LINT_MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class Finished:
    """The processes as the folder now holds them, and the lint findings (None: none linted)."""

    processes: list[dict[str, Any]]
    lint: list[dict[str, Any]] | None
    #: (message, hint) about what could not be used (a damaged kernel_symbols.json, say).
    warnings: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Analysed:
    """What one process's lint and report need of its trace alone, worked out by
    :class:`Ahead` while the decode's other exports still ran."""

    trace: trace_mod.Trace
    raw: rawevents.RawEvents | None
    paired: flows_mod.Pairing
    parts: report_mod.TraceParts


class Ahead:
    """The lint's and the report's work on a process's trace, begun as soon as the decode has
    assembled it (:meth:`assembled`, in a thread of its own) beside the decode's other
    exports: on a big capture the Perfetto export's last parts still run then, and the lint
    and report, a second on one core, were the decode's last step after them
    (docs/history/benchmarks.md, "The report beside the Perfetto export"). :func:`finish` takes what
    is done; what is not (or failed) it works out itself, as without. No more traces are
    held here than the decode keeps (:data:`~iket_cli.decode.tasks.MOST_TRACES`)."""

    def __init__(self, capture_dir: Path, formats: list[str]) -> None:
        self.capture_dir = capture_dir
        self.roles, self.dags, self.warnings = _annotations(capture_dir)
        self._lock = threading.Lock()
        self._futures: dict[str, Future] = {}
        #: Each process's raw events (:mod:`..model.rawevents`), read from the start where
        #: the decode assembles traces (for a report).
        self._raw = {pid_hex: Future() for pid_hex, _ in find_raw(capture_dir)} if "html" in formats else {}
        if self._raw:
            threading.Thread(target=self._read_raw, daemon=True).start()

    def _read_raw(self) -> None:
        for pid_hex, future in self._raw.items():
            try:
                future.set_result(rawevents.read(self.capture_dir / raw_manifest(pid_hex)))
            except BaseException as error:
                future.set_exception(error)

    def assembled(self, name: str, trace: trace_mod.Trace) -> None:
        """The decode assembled the trace it wrote as ``name``: analyse it now."""
        with self._lock:
            if len(self._futures) >= MOST_TRACES:
                return
            future = self._futures[name] = Future()
        threading.Thread(target=self._analyse, args=(name, trace, future), daemon=True).start()

    def _analyse(self, name: str, trace: trace_mod.Trace, future: Future) -> None:
        try:
            with ThreadPoolExecutor(1) as beside:  # numpy beside numpy: a second core where the GIL allows
                summing = beside.submit(summary_mod.summarize_groups, trace)
                paired = flows_mod.pair(trace, self.dags) if self.dags else flows_mod.Pairing()
                drawn = report_mod.drawn_parts(trace, roles=self.roles, dags=self.dags, flows=paired.drawn())
                parts = report_mod.TraceParts(summing.result(), *drawn)
            pid_hex = pid_of(name)
            raw = self._raw[pid_hex].result() if pid_hex in self._raw else None
            future.set_result(Analysed(trace, raw, paired, parts))
        except BaseException as error:  # finish works it out again, and says what went wrong
            future.set_exception(error)

    def take(self, name: str) -> Analysed | None:
        """What was worked out for ``name`` (waiting for it), once; None if nothing was."""
        with self._lock:
            future = self._futures.pop(name, None)
        if future is None or future.exception() is not None:
            return None
        return future.result()


def finish(
    capture_dir: Path,
    record: dict[str, Any],
    formats: list[str],
    *,
    kept: frozenset[str] = frozenset(),
    traces: dict[str, trace_mod.Trace] | None = None,
    ahead: Ahead | None = None,
) -> Finished:
    """Lint every process's JSON trace, write its report when ``html`` is asked for and its
    arrows (``.flows.pftrace``) when the capture holds a DAG, then remove the JSON traces
    made only for the report (not those named in ``kept``, which were there before).

    ``record`` is the manifest as it stands (labels attached: the reports name processes
    by rank, and its counts are not counted again). ``traces``: the traces the decode
    assembled, by file name (:func:`iket_cli.decode.tasks.take_traces`), each taken out as
    it is used (its memory goes with its report); the others are read. Raises the trace
    reader's :class:`~iket_cli.errors.IketError` when a report cannot be built. ``ahead``:
    the work on the assembled traces begun while the decode ran (its annotations too).
    """
    report = "html" in formats
    roles, dags, warnings = (ahead.roles, ahead.dags, ahead.warnings) if ahead else _annotations(capture_dir)
    findings: list[dict[str, Any]] | None = None
    mode = mode_of(record)
    for process in record["processes"]:
        artifact = process["artifacts"].get("trace_json")
        if not artifact or (not report and not dags and artifact["bytes"] > LINT_MAX_BYTES):
            continue
        done = ahead.take(artifact["path"]) if ahead else None
        try:
            given = traces.pop(artifact["path"], None) if traces else None
            loaded = done.trace if done else given or trace_mod.load(capture_dir / artifact["path"])
        except IketError:
            if report:
                raise
            continue  # an unreadable trace is iket show's to report
        raw = done.raw if done else rawevents.read(capture_dir / raw_manifest(process["pid_hex"]))
        paired = done.paired if done else flows_mod.pair(loaded, dags) if dags else flows_mod.Pairing()
        sites = process.get("payload_sites")
        first = process.get("repeat", 1) == 1  # the completeness record is repeat 1's
        losses = completeness.of_process(record, process["pid_hex"]) if first else None
        found = lint_mod.lint(
            loaded, raw=raw, sites=sites, mode=mode, unpaired=paired.undecided, losses=losses
        )
        findings = (findings or []) + [{"process": process["pid_hex"], **f.to_dict()} for f in found]
        arrows = paired.drawn()
        if arrows:
            process["flows"] = _write_flows(capture_dir, process, loaded, arrows)
        if report:
            parts = done.parts if done else None
            report_mod.process_page(
                capture_dir, record, process, loaded, found, roles=roles, dags=dags, flows=arrows, parts=parts
            )
        del loaded, done
    if report and "json" not in formats:
        for process in record["processes"]:
            artifact = process["artifacts"].get("trace_json")
            if artifact and artifact["path"] not in kept:
                (capture_dir / artifact["path"]).unlink(missing_ok=True)
    counted = artifacts.counted_in(record["processes"])
    return Finished(artifacts.rescan(capture_dir, record["processes"], counted), findings, warnings)


def _annotations(capture_dir: Path) -> tuple[Roles | None, list[Dag], list[tuple[str, str]]]:
    """The capture's warp roles and DAGs; a file that cannot be read is a warning, not a failure."""
    warnings = []
    try:
        roles = annotations.roles_for(capture_dir)
    except IketError as error:
        roles = None
        warnings.append(
            (f"warp roles not used: {error.message}", "the capture stands; fix or remove the file")
        )
    try:
        dags = annotations.dags_for(capture_dir)
    except IketError as error:
        dags = []
        warnings.append(
            (f"DAG arrows not drawn: {error.message}", "the capture stands; fix or remove the file")
        )
    return roles, dags, warnings


def _write_flows(capture_dir: Path, process: dict[str, Any], loaded: trace_mod.Trace, arrows: list) -> int:
    """``iket_pid_<hex>.flows.pftrace``: the Perfetto trace with the arrows; the number placed.

    A second file, so that the ``.pftrace`` stays byte for byte what run-iket writes.
    """
    artifact = process["artifacts"].get("perfetto")
    if not artifact:
        return 0
    links = [(_key(loaded, f.launch, f.source), _key(loaded, f.launch, f.target)) for f in arrows]
    data, placed = pftrace.add_flows((capture_dir / artifact["path"]).read_bytes(), links)
    out = capture_dir / artifact_name(process["pid_hex"], "flows")
    atomic.write(out, data)
    return placed


def _key(loaded: trace_mod.Trace, launch: int, index: int) -> pftrace.SliceKey:
    ranges = loaded.launches[launch].ranges
    where = loaded.locations[ranges.loc[index]]
    return (tuple(where["ctaId"]), where["warpId"], loaded.name(ranges.name[index]), ranges.start[index])
