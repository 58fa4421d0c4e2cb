"""After decoding: each JSON trace loaded once, linted, and made into its report; only then
are the JSON traces that were made just for the report removed.

``iket profile`` and ``iket postprocess`` both end here, so a capture's lint findings are
recorded whatever its formats (a trace too big to lint cheaply is skipped unless its report
needs it loaded anyway), and nothing is removed before every reader of it has run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis import lint as lint_mod
from ..model import artifacts
from ..model import trace as trace_mod
from ..render import report as report_mod

#: Without a report to build, traces up to this size are linted (larger ones: run iket lint).
LINT_MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class Finished:
    """The processes as the folder now holds them, and the lint findings (None: none linted)."""

    processes: list[dict[str, Any]]
    lint: list[dict[str, Any]] | None


def finish(
    capture_dir: Path, record: dict[str, Any], formats: list[str], *, kept: frozenset[str] = frozenset()
) -> Finished:
    """Lint every process's JSON trace, write its report when ``html`` is asked for, then
    remove the JSON traces made only for the report (not those named in ``kept``, which
    were there before).

    ``record`` is the manifest as it stands (labels attached: the reports name processes
    by rank). Raises the trace reader's :class:`~iket_cli.errors.IketError` when a report
    cannot be built.
    """
    report = "html" in formats
    findings: list[dict[str, Any]] | None = None
    for process in record["processes"]:
        artifact = process["artifacts"].get("trace_json")
        if not artifact or (not report and artifact["bytes"] > LINT_MAX_BYTES):
            continue
        if report:
            loaded = trace_mod.load(capture_dir / artifact["path"])
        else:
            try:
                loaded = trace_mod.load(capture_dir / artifact["path"])
            except Exception:
                continue
        found = lint_mod.lint(loaded)
        findings = (findings or []) + [{"process": process["pid_hex"], **f.to_dict()} for f in found]
        if report:
            report_mod.process_page(capture_dir, record, process, loaded, found)
        del loaded
    if report and "json" not in formats:
        for process in record["processes"]:
            artifact = process["artifacts"].get("trace_json")
            if artifact and artifact["path"] not in kept:
                (capture_dir / artifact["path"]).unlink(missing_ok=True)
    return Finished(artifacts.rescan(capture_dir, record["processes"]), findings)
