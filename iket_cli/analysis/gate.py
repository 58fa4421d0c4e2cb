"""The rule ``iket diff --fail-over`` applies to repeated captures: a rank test on the repeats.

Within one capture a range's instances (one per warp and iteration) share that run's
conditions: clocks, the other work on the GPU, where the kernel landed. Their spread says
nothing of how the whole capture moves from run to run, which is what makes a 5% change
look real or not. With repeated captures (``iket profile --repeat N``) each repeat is one
sample of that: the statistic per repeat (the median of its instances, by default) is
computed on each side, and a range counts as slower when

* the median of NEW's per-repeat values exceeds BASE's by more than the threshold and by
  more than one step of the GPU timer, and
* a one-sided Mann-Whitney rank test of NEW's per-repeat values against BASE's gives
  p ≤ :data:`ALPHA` (exact: every way of splitting the pooled values into the two groups
  counted, ties at mid-ranks).

The test assumes nothing of the distribution, and it can reach p ≤ 0.05 only with at least
20 ways to split the repeats (3 against 3; the smallest p of 3 against 3 is 1/20): with fewer,
a change over the threshold is reported as undecided, "not enough repeats to decide", which
fails a gate rather than passing it silently. Its false-alarm rate, measured on repeated captures of an
unchanged kernel, is in ``docs/diff.md``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ..model.vocab import TIMER_STEP_NS

#: The significance level of the rank test.
ALPHA = 0.05
#: The fewest repeats a side for which the test can reach ALPHA (C(6, 3) = 20 splits).
MIN_REPEATS = 3


def enough(base: int, new: int) -> bool:
    """Whether ``base`` against ``new`` repeats can reach p ≤ ALPHA at all."""
    return base >= 1 and new >= 1 and 1 / math.comb(base + new, new) <= ALPHA


def p_slower(base: list[float], new: list[float]) -> float:
    """One-sided p-value that ``new`` tends to be larger than ``base`` (Mann-Whitney, exact).

    The statistic is NEW's rank sum (mid-ranks for ties, doubled to stay integral); its
    distribution over all C(n + m, m) splits is counted by dynamic programming, so 20
    against 20 repeats is as quick as 3 against 3.
    """
    pooled = sorted([*base, *new])
    doubled = {}  # value -> twice its mid-rank (1-based)
    i = 0
    while i < len(pooled):
        j = i
        while j < len(pooled) and pooled[j] == pooled[i]:
            j += 1
        doubled[pooled[i]] = i + j + 1  # 2 * ((i + 1) + j) / 2
        i = j
    ranks = [doubled[v] for v in pooled]
    observed = sum(doubled[v] for v in new)
    m = len(new)
    # ways[k][s]: subsets of k of the values seen so far with doubled rank sum s
    ways: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(m)]
    for rank in ranks:
        for k in range(m, 0, -1):
            below = ways[k - 1]
            row = ways[k]
            for total, count in below.items():
                row[total + rank] = row.get(total + rank, 0) + count
    at_least = sum(count for total, count in ways[m].items() if total >= observed)
    return at_least / math.comb(len(pooled), m)


def judge(base: list[float], new: list[float], limit: float) -> tuple[str, float | None]:
    """``(verdict, p)`` for per-repeat values: ``slower``, ``same`` or ``undecided``.

    ``undecided``: the change is over the threshold but too few repeats to test it.
    """
    a, b = statistics.median(base), statistics.median(new)
    over = b - a > abs(a) * limit and b - a > TIMER_STEP_NS
    if not over:
        return "same", None
    if not enough(len(base), len(new)):
        return "undecided", None
    p = p_slower(base, new)
    return ("slower" if p <= ALPHA else "same"), p


@dataclass(frozen=True)
class Verdict:
    """Why a gate fails: one line and what to do. ``iket diff --fail-over`` raises it as an
    error; ``iket run --baseline`` marks the job ``regressed`` with it."""

    message: str
    hint: str | None = None


def verdict(changes: list, fail_over: str | None, *, unmatched_fails: bool) -> Verdict | None:
    """The gate's judgement of ``changes`` (:func:`.diff.compare`'s, worst first): the
    regressions, else the ranges too few repeats can decide, else (``unmatched_fails``: a gate
    must judge every range of its baseline) the baseline's ranges with no match; None: it passes."""
    regressions = [c for c in changes if c.regression]
    if regressions:
        worst = regressions[0]
        return Verdict(
            f"{len(regressions)} range(s) got slower than --fail-over {fail_over} allows; worst: "
            f"{worst.name or worst.kernel} / {worst.range} {worst.ratio:.3f}x"
        )
    unsure = [c for c in changes if c.undecided]
    if unsure:
        first = unsure[0]
        return Verdict(
            f"not enough repeats to decide: {len(unsure)} range(s) over --fail-over {fail_over} "
            f"({first.name or first.kernel} / {first.range} {first.ratio:.3f}x) with "
            f"{first.repeats[0]} repeat(s) of BASE and {first.repeats[1]} of NEW",
            hint="capture both sides with 3 repeats or more (iket profile --repeat 3, or repeat = 3 in "
            "iket.toml): the rank test needs 3 against 3",
        )
    missing = [c for c in changes if c.status == "removed"] if unmatched_fails else []
    if missing:
        return Verdict(
            f"{len(missing)} range(s) of BASE have no match in NEW, so --fail-over cannot judge "
            f"them: {', '.join(f'{c.name or c.kernel} / {c.range}' for c in missing[:3])}",
            hint="a renamed or removed range cannot be gated: keep its name, or make NEW the baseline",
        )
    return None
