"""``iket diff``'s logic: match (kernel, range) pairs of two captures and judge the change.

Every range has many instances per capture (one per warp and iteration), so a change is
judged against the instances' own spread, not only against a percentage:

* the statistic (``median``, ``mean``, ``p90`` or ``total``) must have grown by more than the
  threshold (``--fail-over 5%``, or per range: ``mainloop=3%,*=10%``);
* by more than the GPU timer's step (32 ns on the H200): smaller steps are quantisation;
* and by more than the noise explains: the standard error of each side's median is
  estimated as ``1.2533 · σ / √n`` with the robust ``σ = IQR / 1.349``, and the change must
  exceed three combined standard errors (``3 · √(se_base² + se_new²)``). With one instance
  per side there is no spread to use, and only the first two tests apply.

Repeated captures (``iket profile --repeat N``) on either side are judged by the
repeats instead, with a rank test (:mod:`.gate`): one value per repeat, a side that was
captured once counting as one repeat.

Processes are pooled: a (kernel, range) pair collects its instances from every process of
the capture, since process ids differ from run to run. A kernel that recorded no event (every
kernel of a ``--warp-trace`` capture) is compared by its launch spans, as a range named
``launch span`` with one instance per launch: ``iket profile --warp-trace`` before and after a
change of any CUDA program gives a per-kernel diff and gate.
"""

from __future__ import annotations

import fnmatch
import math
from collections import defaultdict
from dataclasses import dataclass

from ..errors import UsageError
from ..model import trace as trace_mod
from ..model.annotations import dags_for
from ..model.names import Namer, short
from ..model.reading import Opened
from ..model.vocab import DIFF_STATS, TIMER_STEP_NS
from . import gate, launches, spread, stages
from .stats import nearest_rank

NOISE_SIGMAS = 3.0


@dataclass
class Change:
    kernel: str  # the raw symbol
    range: str
    base: float | None
    new: float | None
    base_count: int
    new_count: int
    ratio: float | None
    delta: float | None
    impact_ns: float  # change of the total time spent in the range
    noise_ns: float | None
    regression: bool
    status: str  # "matched", "added", "removed"
    name: str = ""  # the kernel's short name (model.names), unique among both captures
    #: repeated captures (analysis.gate): repeats counted per side, the rank test's p (when
    #: the change was over the threshold) and whether there were too few repeats to decide
    repeats: tuple[int, int] | None = None
    p_value: float | None = None
    undecided: bool = False


#: Durations by (kernel, range name), per repeat (1 for a capture made once).
ByRepeat = dict[int, dict[tuple[str, str], list[int]]]


def by_repeat(opened: Opened) -> ByRepeat:
    """Every range duration (and launch span) of a capture, by (kernel, range name), pooled
    over processes, per repeat: each trace read once, its repeat taken from the manifest."""
    found: ByRepeat = defaultdict(lambda: defaultdict(list))
    for seen, loaded in opened.unfiltered():
        path = seen.path
        into = found[(seen.beside.process or {}).get("repeat") or 1]
        named = set()  # the trace's own (kernel, range name) rows
        for launch in loaded.launches:
            r = launch.ranges
            for idx, start, end in zip(r.name, r.start, r.end, strict=True):
                named.add(key := (launch.kernel, loaded.name(idx)))
                into[key].append(end - start)
        for kernel, span in launches.spans(loaded):
            into[_apart((kernel, launches.SPAN_ROW), named)].append(span)
        dags = dags_for(path)
        if dags:  # a pipelined kernel: each stage's period, gated like a range
            for key, gaps in stages.period_gaps(loaded, dags, None).items():
                into[_apart(key, named)] += gaps
    return found


#: Added to a row iket derives (a stage's period, a launch span) whose name a range of the
#: kernel also has (a user may name a range ``load (period)``): the two are never pooled.
DERIVED_MARK = " [iket]"


def _apart(key: tuple[str, str], named: set[tuple[str, str]]) -> tuple[str, str]:
    kernel, label = key
    while (kernel, label) in named:
        label += DERIVED_MARK
    return kernel, label


def bound_moves(base: Opened, new: Opened) -> list[str]:
    """Where the stage that bounds a kernel is not the same in NEW as in BASE: one line each
    (information, not a failure: the gate judges the periods themselves)."""

    def bounds(opened: Opened) -> dict[str, str | None]:
        found = {}
        for seen in opened.found:
            dags = dags_for(seen.path)
            if dags:
                for pipe in stages.pipelines(trace_mod.load(seen.path), dags, None):
                    found.setdefault(pipe.kernel, pipe.bound)
        return found

    before, after = bounds(base), bounds(new)
    return [
        f"{short(kernel)}: the bound moved from `{before[kernel]}` to `{after[kernel]}`"
        for kernel in before
        if kernel in after and before[kernel] != after[kernel]
    ]


def _pooled(found: ByRepeat) -> dict[tuple[str, str], list[int]]:
    pooled: dict[tuple[str, str], list[int]] = defaultdict(list)
    for durations in found.values():
        for key, values in durations.items():
            pooled[key] += values
    return pooled


def per_repeat(
    opened: Opened, stat: str, found: ByRepeat | None = None
) -> dict[tuple[str, str], list[float]] | None:
    """The statistic of each (kernel, range) in each counted repeat of a repeated capture;
    None for a capture made once. ``found``: :func:`by_repeat` of it, where already read."""
    record = opened.manifest
    if not spread.repeated(record):
        return None
    found = by_repeat(opened) if found is None else found
    result: dict[tuple[str, str], list[float]] = defaultdict(list)
    for repeat in record["repeats"]:
        if repeat["status"] in spread.COUNTED:
            for key, values in found.get(repeat["index"], {}).items():
                result[key].append(statistic(values, stat))
    return result


def statistic(values: list[int], stat: str) -> float:
    ordered = sorted(values)
    if stat == "total":
        return float(sum(ordered))
    if stat == "mean":
        return sum(ordered) / len(ordered)
    return float(ordered[nearest_rank(len(ordered), 0.5 if stat == "median" else 0.9)])


def median_se(values: list[int]) -> float | None:
    """Robust standard error of the median; None with fewer than two instances."""
    n = len(values)
    if n < 2:
        return None
    ordered = sorted(values)
    iqr = ordered[(3 * n) // 4] - ordered[n // 4]
    return 1.2533 * (iqr / 1.349) / math.sqrt(n)


def parse_thresholds(spec: str | None) -> list[tuple[str, float]]:
    """``5%`` or ``mainloop=3%,*=10%`` -> [(pattern, fraction)], most specific first. A bare
    number is a fraction (``0.05`` is 5%); one of 1 or more is refused (``5`` meant as 5% would
    read as 500%, a gate that never fires)."""
    if not spec:
        return []
    rules = []
    for part in spec.split(","):
        pattern, sep, value = part.rpartition("=")
        pattern = pattern.strip() if sep else "*"
        rules.append((pattern, _fraction(part, value.strip())))
    return sorted(rules, key=lambda rule: rule[0] == "*")


def _fraction(part: str, value: str) -> float:
    """A threshold's value as a fraction: ``5%`` or a bare fraction below 1."""
    percent = value.endswith("%")
    try:
        number = float(value.removesuffix("%"))
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise UsageError(
            f"--fail-over {part!r} is not a threshold",
            hint="e.g. --fail-over 5% or --fail-over 'mainloop=3%,*=10%'",
        )
    if number < 0:
        raise UsageError(f"--fail-over {part!r} is negative", hint="e.g. --fail-over 5%")
    if not percent and number >= 1:
        raise UsageError(
            f"--fail-over {part!r}: a bare number is a fraction ({value} would be {number:.0%})",
            hint=f"did you mean {value}%?",
        )
    return number / 100 if percent else number


def threshold_for(rules: list[tuple[str, float]], kernel: str, name: str) -> float | None:
    """The first rule matching the range name, or ``kernel/range`` (the kernel by its raw or
    short name)."""
    for pattern, fraction in rules:
        if fnmatch.fnmatchcase(name, pattern) or any(
            fnmatch.fnmatchcase(f"{k}/{name}", pattern) for k in (kernel, short(kernel))
        ):
            return fraction
    return None


@dataclass(frozen=True)
class Compared:
    """``iket diff``'s value: the changes by impact, and the statistic compared."""

    changes: list[Change]
    stat: str


def compare(base: Opened, new: Opened, *, stat: str = "median", fail_over: str | None = None) -> list[Change]:
    """All (kernel, range) changes from ``base`` to ``new``, by impact."""
    if stat not in DIFF_STATS:
        raise UsageError(f"unknown --stat {stat!r}", hint=f"use one of {', '.join(DIFF_STATS)}")
    rules = parse_thresholds(fail_over)
    read = by_repeat(base), by_repeat(new)  # each trace loaded once per side
    before, after = _pooled(read[0]), _pooled(read[1])
    repeated = per_repeat(base, stat, read[0]), per_repeat(new, stat, read[1])
    keys = [*before, *[k for k in after if k not in before]]
    namer = Namer(kernel for kernel, _ in keys)
    changes = []
    for key in keys:
        old, cur = before.get(key, []), after.get(key, [])
        changes.append(_change(key, old, cur, stat, rules))
        if old and cur and repeated != (None, None):
            a = repeated[0].get(key, []) if repeated[0] is not None else [statistic(old, stat)]
            b = repeated[1].get(key, []) if repeated[1] is not None else [statistic(cur, stat)]
            if a and b:  # (a range seen only in a repeat left out has nothing to test)
                _by_repeats(changes[-1], a, b, threshold_for(rules, *key))
        changes[-1].name = namer(key[0])
    return sorted(changes, key=lambda c: -abs(c.impact_ns))


def _by_repeats(change: Change, base: list[float], new: list[float], limit: float | None) -> None:
    """Judge a matched range of repeated captures by the rank test on its per-repeat values."""
    import statistics

    change.repeats = (len(base), len(new))
    change.base, change.new = statistics.median(base), statistics.median(new)
    change.delta = change.new - change.base
    change.ratio = change.new / change.base if change.base else None
    change.noise_ns = None
    if limit is None:
        change.regression = False
        return
    verdict, change.p_value = gate.judge(base, new, limit)
    change.regression, change.undecided = verdict == "slower", verdict == "undecided"


def _change(key, old: list[int], cur: list[int], stat: str, rules) -> Change:
    kernel, name = key
    if not old or not cur:
        total = float(sum(cur) - sum(old))
        value = statistic(cur or old, stat)
        return Change(
            kernel,
            name,
            None if not old else value,
            None if not cur else value,
            len(old),
            len(cur),
            None,
            None,
            total,
            None,
            False,
            "added" if cur else "removed",
        )
    a, b = statistic(old, stat), statistic(cur, stat)
    delta = b - a
    ratio = b / a if a else None
    se_a, se_b = median_se(old), median_se(cur)
    noise = NOISE_SIGMAS * math.hypot(se_a, se_b) if se_a is not None and se_b is not None else None
    if noise is not None and stat == "total":
        noise *= len(cur)  # the total moves with n times the per-instance noise
    limit = threshold_for(rules, kernel, name)
    regression = (
        limit is not None
        and delta > abs(a) * limit
        and delta > TIMER_STEP_NS
        and (noise is None or delta > noise)
    )
    impact = float(sum(cur) - sum(old))
    return Change(kernel, name, a, b, len(old), len(cur), ratio, delta, impact, noise, regression, "matched")
