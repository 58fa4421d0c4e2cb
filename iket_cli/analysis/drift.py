"""Pass drift: did the capture pass launch what the tracker pass launched?

The tracker pass sizes IKET's buffers and the capture pass fills them, so a workload whose
launches differ between the two passes (non-deterministic launches, autotuning,
data-dependent loops) gives wrong data or an illegal memory access. Both passes leave a
launch list per process (``tracker/pid_*/tracker.json`` and ``iket/pid_*/iket.data.json``);
process ids differ between the passes, so the counts are compared per kernel name, pooled
over the processes of each pass, along with the number of processes.
"""

from __future__ import annotations

from pathlib import Path

from ..model.artifacts import launch_counts
from ..model.names import Namer
from ..model.vocab import RAW_DIR, RAW_MANIFEST, TRACKER_DIR, TRACKER_JSON


def check(capture_dir: Path) -> list[str]:
    """What differs between the passes; empty when they agree or a pass left no record."""
    tracked, tracked_procs = launch_counts(capture_dir / TRACKER_DIR, TRACKER_JSON, "kernelName")
    captured, captured_procs = launch_counts(capture_dir / RAW_DIR, RAW_MANIFEST, "kernelName")
    if not tracked_procs or not captured_procs:
        return []  # --warp-trace has no tracker pass; nothing to compare
    problems = []
    if tracked_procs != captured_procs:
        problems.append(
            f"the tracker pass had {tracked_procs} CUDA process(es), the capture pass {captured_procs}"
        )
    keys = sorted(set(tracked) | set(captured))
    namer = Namer(key[0] for key in keys)  # readable names, told apart where they collide
    for key in keys:
        if tracked[key] != captured[key]:
            problems.append(
                f"{namer(key[0])}: {tracked[key]:,} launch(es) in the tracker pass, "
                f"{captured[key]} in the capture pass"
            )
    return problems
