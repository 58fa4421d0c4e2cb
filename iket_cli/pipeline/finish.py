"""After decoding: each JSON trace loaded once, linted, and made into its report; only then
are the JSON traces that were made just for the report removed.

``iket profile`` and ``iket postprocess`` both end here, so a capture's lint findings are
recorded whatever its formats (a trace too big to lint cheaply is skipped unless its report
needs it loaded anyway), and nothing is removed before every reader of it has run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis import flows as flows_mod
from ..analysis import lint as lint_mod
from ..errors import IketError
from ..model import annotations, artifacts, atomic, pftrace, rawevents
from ..model import trace as trace_mod
from ..model.annotations import Dag, Roles
from ..model.folder import mode_of
from ..model.vocab import artifact_name, raw_manifest
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


def finish(
    capture_dir: Path,
    record: dict[str, Any],
    formats: list[str],
    *,
    kept: frozenset[str] = frozenset(),
    traces: dict[str, trace_mod.Trace] | None = None,
) -> Finished:
    """Lint every process's JSON trace, write its report when ``html`` is asked for and its
    arrows (``.flows.pftrace``) when the capture holds a DAG, then remove the JSON traces
    made only for the report (not those named in ``kept``, which were there before).

    ``record`` is the manifest as it stands (labels attached: the reports name processes
    by rank, and its counts are not counted again). ``traces``: the traces the decode
    assembled, by file name (:func:`iket_cli.decode.tasks.take_traces`), each taken out as
    it is used (its memory goes with its report); the others are read. Raises the trace
    reader's :class:`~iket_cli.errors.IketError` when a report cannot be built.
    """
    report = "html" in formats
    roles, dags, warnings = _annotations(capture_dir)
    findings: list[dict[str, Any]] | None = None
    mode = mode_of(record)
    for process in record["processes"]:
        artifact = process["artifacts"].get("trace_json")
        if not artifact or (not report and not dags and artifact["bytes"] > LINT_MAX_BYTES):
            continue
        try:
            given = traces.pop(artifact["path"], None) if traces else None
            loaded = given or trace_mod.load(capture_dir / artifact["path"])
        except IketError:
            if report:
                raise
            continue  # an unreadable trace is iket show's to report
        raw = rawevents.read(capture_dir / raw_manifest(process["pid_hex"]))
        paired = flows_mod.pair(loaded, dags) if dags else flows_mod.Pairing()
        sites = process.get("payload_sites")
        found = lint_mod.lint(loaded, raw=raw, sites=sites, mode=mode, unpaired=paired.undecided)
        findings = (findings or []) + [{"process": process["pid_hex"], **f.to_dict()} for f in found]
        arrows = paired.drawn()
        if arrows:
            process["flows"] = _write_flows(capture_dir, process, loaded, arrows)
        if report:
            report_mod.process_page(
                capture_dir, record, process, loaded, found, roles=roles, dags=dags, flows=arrows
            )
        del loaded
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
