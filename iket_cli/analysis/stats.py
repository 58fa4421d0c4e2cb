"""Distributions of durations: nearest-rank percentiles over numpy arrays.

Shared by :mod:`.summary` (ranges, marks) and :mod:`.launches` (launch spans, warps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model.vocab import TIMER_STEP_NS


@dataclass
class Stats:
    """Distribution of durations (or offsets) in nanoseconds."""

    count: int
    total: int
    mean: float
    min: int
    p50: int
    p90: int
    p99: int
    max: int

    @property
    def at_resolution_limit(self) -> bool:
        """True when the typical value is within one step of the timer: read it with care."""
        return self.p50 <= TIMER_STEP_NS


def stats(values) -> Stats | None:
    """Nearest-rank percentiles of a list or numpy array of ints; None for no values."""
    import numpy as np

    ordered = np.sort(np.asarray(values, dtype=np.int64))
    n = len(ordered)
    if not n:
        return None

    def rank(q: float) -> int:
        return int(ordered[nearest_rank(n, q)])

    total = int(ordered.sum())
    return Stats(n, total, total / n, int(ordered[0]), rank(0.5), rank(0.9), rank(0.99), int(ordered[-1]))


def nearest_rank(n: int, q: float) -> int:
    """The index, in ``n`` sorted values, of their nearest-rank ``q`` percentile: iket's
    percentiles are values that occurred (the median of an even count is the lower middle)."""
    return min(n - 1, max(0, math.ceil(q * n) - 1))


def median(values) -> float | None:
    """The nearest-rank median of a numpy array (None for none): what ``p50`` is everywhere."""
    import numpy as np

    if not len(values):
        return None
    return float(np.partition(values, nearest_rank(len(values), 0.5))[nearest_rank(len(values), 0.5)])


def distinct(values, counts: bool = False):
    """The sorted distinct values of an array of small non-negative ints (warps, names, rows),
    found by counting: one pass, where ``np.unique`` sorts or hashes (docs/history/benchmarks.md, the
    stage analysis). With ``counts``: (values, how many times each occurs)."""
    import numpy as np

    tally = np.bincount(np.asarray(values, dtype=np.int64)) if len(values) else np.zeros(0, np.int64)
    found = np.flatnonzero(tally)
    return (found, tally[found]) if counts else found


#: Up to this value :func:`any_distinct` counts; above, a count's table would outgrow the values.
COUNTED_MAX = 1 << 24


def any_distinct(values, counts: bool = False):
    """The sorted distinct values of an int array: counted (:func:`distinct`) when they are
    small and non-negative (an index column) and not far sparser than the array, else by
    ``np.unique`` (a -1 among them). With ``counts``: (values, how many times each occurs)."""
    import numpy as np

    values = np.asarray(values, dtype=np.int64)
    if (
        len(values)
        and int(values.min()) >= 0
        and int(values.max()) < min(COUNTED_MAX, 4 * len(values) + 4096)
    ):
        return distinct(values, counts)
    return np.unique(values, return_counts=counts)


def ints(column):
    """An ``array`` column as an int64 numpy array (a view where it already is one)."""
    import numpy as np

    if not len(column):
        return np.zeros(0, np.int64)
    values = np.frombuffer(column, dtype=np.int64 if column.itemsize == 8 else np.int32)
    return values.astype(np.int64, copy=False)
