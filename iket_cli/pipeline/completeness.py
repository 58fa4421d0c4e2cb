"""The capture's completeness, judged while the attempt's folder still holds the tracker
pass, the raw capture and the injection logs (:mod:`iket_cli.analysis.completeness`; the
manifest keeps the record).
"""

from __future__ import annotations

from pathlib import Path

from ..analysis import completeness as judge
from ..capture import runiket
from ..model import injection_log
from ..model.completeness import Completeness
from .attempt import Attempt


def check(at: Attempt) -> Completeness:
    """What the attempt lost, each loss noted in ``iket.log``."""
    plan, staging, transcript = at.plan, at.staging, at.transcript
    found = judge.check(
        judge.gather(
            staging.capture_dir, tracker_dir=plan.tracker.dir, output_lines=failed_lines(staging.log_path)
        )
    )
    for loss in found.losses:
        transcript.write(f"[iket] incomplete: {loss.message}")
    return found


def failed_lines(log_path: Path) -> list[str]:
    """The library's failed operations the capture pass printed: the lines of ``iket.log`` that
    say one, from run-iket's line that starts the capture pass on."""
    lines, capturing = [], False
    try:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            for line in log:
                capturing = capturing or runiket.phase_of(line) == "capture"
                if capturing and injection_log.OPERATION_FAILED.search(line):
                    lines.append(line)
    except OSError:
        return []
    return lines
