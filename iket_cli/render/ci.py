"""``iket run``'s reports for CI: JUnit XML and the markdown summary of a job page.

Both are rendered from the jobs as ``run-manifest.json`` records them (plain dicts), so a
report can be made again from a run's output root alone.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ..analysis.summary import summarize_capture
from ..errors import IketError
from ..model.reading import open_capture
from ..model.vocab import JOB_FAILING
from .tables import markdown_text, render_markdown

Job = dict[str, Any]


def junit(jobs: list[Job]) -> str:
    """JUnit XML: one test case per job and one per gated (kernel, range) regression."""
    from xml.etree import ElementTree as ET

    cases = []
    for job in jobs:
        case = ET.Element("testcase", classname="iket.run", name=job["name"], time=f"{job['duration_s']:.3f}")
        if job["status"] in JOB_FAILING and job["status"] != "regressed":
            failure = ET.SubElement(
                case, "failure", message=job["error"] or job["status"], type=job["status"]
            )
            failure.text = "\n".join(job["log_tail"])
        cases.append(case)
        for reg in job["regressions"]:
            gated = ET.Element(
                "testcase",
                classname=f"iket.run.{job['name']}",
                name=f"{reg.get('name') or reg['kernel']}/{reg['range']}",
                time="0",
            )
            ET.SubElement(
                gated,
                "failure",
                type="regression",
                message=f"{reg['ratio']:.3f}x ({reg['base']:.0f} ns -> {reg['new']:.0f} ns)",
            )
            cases.append(gated)
    failures = sum(1 for c in cases if c.find("failure") is not None)
    suite = ET.Element(
        "testsuite",
        name="iket",
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{sum(job['duration_s'] for job in jobs):.3f}",
    )
    suite.extend(cases)
    suites = ET.Element("testsuites", name="iket", tests=str(len(cases)), failures=str(failures))
    suites.append(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _slurm_cells(slurm: dict[str, Any] | None) -> str:
    """`` 12 (COMPLETED) | gpu07 | 3 s |``: the Slurm columns of one job's row."""
    if not slurm:
        return " - | - | - |"
    queued = f"{slurm['queued_s']:.0f} s" if slurm.get("queued_s") is not None else "-"
    return f" {slurm['job_id']} ({slurm['state']}) | {slurm.get('node') or '-'} | {queued} |"


def summary_markdown(jobs: list[Job], root: Path) -> str:
    """The job page's summary: a status table, top ranges per job, regressions."""
    on_slurm = any(job.get("slurm") for job in jobs)
    lines = [
        "## iket run",
        "",
        "| job | status | duration | GPU | error |"
        if not on_slurm
        else "| job | status | duration | GPU | Slurm job | node | queued | error |",
        "| --- | --- | ---: | --- | --- |"
        if not on_slurm
        else "| --- | --- | ---: | --- | --- | --- | ---: | --- |",
    ]
    for job in jobs:
        where = _slurm_cells(job.get("slurm")) if on_slurm else ""
        lines.append(
            f"| {job['name']} | {job['status']} | {job['duration_s']:.1f} s | {job['gpu'] or '-'} "
            f"|{where} {job['error'] or ''} |"
        )
    for job in jobs:
        if job["manifest"] is None or (job["status"] in JOB_FAILING and job["status"] != "regressed"):
            continue
        try:
            processes = summarize_capture(open_capture(root / job["name"]), top=3)
        except IketError:
            continue
        buffer = io.StringIO()
        render_markdown(processes, buffer)
        lines += ["", f"### {job['name']}: top ranges", "", *buffer.getvalue().splitlines()]
        for reg in job["regressions"]:
            kernel = reg.get("name") or reg["kernel"]
            lines.append(f"- **regression** {markdown_text(kernel)} / {reg['range']}: {reg['ratio']:.3f}x")
    return "\n".join(lines) + "\n"
