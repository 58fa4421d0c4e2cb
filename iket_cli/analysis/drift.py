"""Pass drift: did the capture pass launch what the tracker pass launched?

The tracker pass sizes IKET's buffers and the capture pass fills them, so a workload whose
launches differ between the two passes (non-deterministic launches, autotuning,
data-dependent loops) gives wrong data or an illegal memory access. Both passes leave a
launch list per process (``tracker/pid_*/tracker.json`` and ``iket/pid_*/iket.data.json``);
process ids differ between the passes, so the counts are compared per kernel name, pooled
over the processes of each pass, along with the number of processes.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..model.vocab import RAW_DIR, RAW_MANIFEST, RAW_PROCESS_PREFIX, TRACKER_DIR, TRACKER_JSON


def launches(folder: Path, pattern: str) -> tuple[int, Counter]:
    """(processes, launches per kernel name) from one pass's per-process launch lists."""
    counts: Counter = Counter()
    processes = 0
    for path in sorted(folder.glob(pattern)):
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        processes += 1
        counts.update(launch.get("kernelName", "?") for launch in data.get("launches", []))
    return processes, counts


def check(capture_dir: Path) -> list[str]:
    """What differs between the passes; empty when they agree or a pass left no record."""
    tracked_procs, tracked = launches(capture_dir / TRACKER_DIR, f"{RAW_PROCESS_PREFIX}*/{TRACKER_JSON}")
    captured_procs, captured = launches(capture_dir / RAW_DIR, f"{RAW_PROCESS_PREFIX}*/{RAW_MANIFEST}")
    if not tracked_procs or not captured_procs:
        return []  # --warp-trace has no tracker pass; nothing to compare
    problems = []
    if tracked_procs != captured_procs:
        problems.append(
            f"the tracker pass had {tracked_procs} CUDA process(es), the capture pass {captured_procs}"
        )
    for kernel in sorted(set(tracked) | set(captured)):
        if tracked[kernel] != captured[kernel]:
            problems.append(
                f"{kernel}: {tracked[kernel]} launch(es) in the tracker pass, "
                f"{captured[kernel]} in the capture pass"
            )
    return problems
