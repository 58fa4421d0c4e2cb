"""What an in-process window lost (``iket_cli.window``, ``%%iket``, the pytest mark, ``--window``,
``--one-pass``): no raw capture and no tracker pass, so its injection log and its trace speak
for it (:func:`of_window`), a budget loss's fix is the one a session survives
(:func:`window_fix`), and a window around calls of a function says the calls it was asked for
and did not get (:func:`calls_short`).
"""

from __future__ import annotations

from typing import Any

from ..model import injection_log, runiket_facts
from ..model.completeness import BUDGET, LAUNCHES, WINDOW_CALLS, Completeness, Loss
from ..model.trace import Trace
from .completeness import Evidence, check, covered, from_trace


def of_window(trace: Trace, log_lines: list[str], log_level: str, budget: int | None = None) -> Completeness:
    """An in-process window's losses: what its injection log says (kept in ``iket.log``) and
    what its trace shows by itself (:func:`from_trace`); no raw capture, no tracker pass. With
    no tracker to count what the warps emit, a budget loss says the budget in effect and to
    raise it (:func:`window_fix`)."""
    reading = injection_log.read_lines(log_lines)
    found = check(Evidence(log=reading, log_level=log_level, failed=reading.failed_operations))
    shown = [Loss(**loss) for loss in from_trace(trace)]
    found.losses += [loss for loss in shown if not covered(loss, found.losses)]
    for loss in found.losses:
        if loss.cause == BUDGET and budget:
            loss.budget, loss.fix = budget, window_fix(budget)
    found.checked.append("trace")
    return found


def calls_short(window: dict[str, Any]) -> Loss | None:
    """The loss of a window whose run ended before the last call it asked for: ``window``
    holds ``function``, ``asked`` and ``calls`` (``[first, last]`` each: what was asked for,
    what the window holds) and ``seen`` (the calls made); None where it holds all it asked."""
    asked, held = window.get("asked"), window.get("calls")
    if not asked or not held or held[1] >= asked[1]:
        return None
    function, made = str(window.get("function")), window.get("seen")
    said = f"calls {asked[0]}-{asked[1]}" if asked[0] != asked[1] else f"call {asked[0]}"
    return Loss(
        function, WINDOW_CALLS, LAUNCHES, asked[1] - held[1],
        f"the window asked for {said} of {function}; the run made {made}, so it holds calls "
        f"{held[0]}-{held[1]} only", f"choose --calls among the {made} calls the run makes", "window",
    )  # fmt: skip


def window_fix(budget: int) -> str:
    """A window's budget fix: no tracker pass sizes it, so twice the budget it had, where the
    installed run-iket's session survives that (:mod:`~iket_cli.model.runiket_facts`); past it,
    the two passes, whose tracker pass counts what the warps emit."""
    facts = runiket_facts.installed()
    more = budget * 2
    if more > facts.safe_max_ts:
        return (
            f"capture with the two passes (iket profile without --one-pass or --window; --extract "
            f"for one call), whose tracker pass sizes the budget: an in-process session dies above "
            f"{facts.safe_max_ts} timestamps per warp (run-iket {facts.release})"
        )
    return (
        f"raise the budget of {budget:,} timestamps per warp, e.g. --max-ts-cnt-per-warp {more} "
        f"(max_ts_cnt_per_warp={more} in iket_cli.window, %%iket and the pytest mark)"
    )
