"""The timestamp budget against the tracker pass's count, before the capture pass is spent.

A launch whose warps emit more timestamps than ``--max-ts-cnt-per-warp`` records nothing at
all, without an error (H100: docs/faults.md, "What IKET can lose"). The
tracker pass counts what the warps emit (``recommended_max_ts_cnt_per_warp``, one number per
process), so a budget below it is known to lose data before the capture pass runs.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import CaptureError
from ...model.artifacts import recommended_budget
from ...model.completeness import BUDGET, fix_for


def short(budget: int | None, tracker_dir: Path, *, stopping: bool) -> CaptureError | None:
    """Why ``budget`` is below what the tracker pass in ``tracker_dir`` counted (an error
    ``--strict`` raises, ``stopping`` the run; else a warning's words); None when it is not,
    or nothing says."""
    needed = recommended_budget(tracker_dir) if budget is not None else None
    if needed is None or budget is None or budget >= needed:
        return None
    stopped = "; stopped before the capture pass (--strict)" if stopping else ""
    return CaptureError(
        f"the budget of {budget:,} timestamps per warp is below the {needed:,} the tracker pass counted: "
        f"launches whose warps emit more will record nothing{stopped}",
        phase="capture",
        hint=fix_for(BUDGET, needed),
    )
