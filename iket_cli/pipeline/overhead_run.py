"""``--overhead``'s run: the kernels timed once more without instrumentation (a
``--warp-trace`` run), beside the capture; what it found, or why not, for the manifest."""

from __future__ import annotations

import os
from typing import Any

from ..capture import runiket
from ..capture.two_pass import passes
from ..errors import CaptureInterrupted, CaptureTimeout, IketError
from ..model.vocab import LOG_NAME, OVERHEAD_DIR
from .attempt import Attempt


def run(at: Attempt) -> dict[str, Any]:
    """Time the kernels once more without instrumentation; a failure here only warns.

    The capture itself is complete and valid by now, so a failed comparison run is
    recorded in the manifest (``overhead.error``) instead of failing the capture; only a
    timeout or an interrupt (which stop everything) fail it.
    """
    from ..analysis import overhead as overhead_mod

    plan, staging, transcript = at.plan, at.staging, at.transcript
    transcript.reporter.phase("overhead")
    ran = passes.plain(plan, staging, transcript, deadline=at.deadline, cancel=at.cancel)
    if isinstance(ran.error, (CaptureTimeout, CaptureInterrupted)):
        raise ran.error
    plain = staging.root / OVERHEAD_DIR
    record: dict[str, Any] = {"run_iket_s": round(ran.duration_s, 3), "kernels": [], "error": None}
    if ran.returncode != 0:
        tail = runiket.last_lines(ran.tail, 1)
        record["error"] = f"the --warp-trace run failed with status {ran.returncode}: {' '.join(tail)}"
    else:
        try:
            record["kernels"] = overhead_mod.measure(staging.capture_dir, plain)
        except IketError as error:
            record["error"] = f"could not read the --warp-trace run's traces: {error.message}"
        if not record["kernels"] and record["error"] is None:
            record["error"] = "the --warp-trace run recorded none of the instrumented kernels"
    if record["error"]:
        transcript.reporter.warn(f"--overhead: {record['error']}", f"the run's output is in {LOG_NAME}")
    if plan.options.keep and plain.is_dir():
        os.replace(plain, staging.capture_dir / OVERHEAD_DIR)
    return record
