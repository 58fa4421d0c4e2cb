"""What a kernel's summary (:mod:`.summary`) needs of each of its launches, by name: range
durations and kinds, mark counts and offsets from their innermost ranges, warp lifetimes.

Each launch is worked out on its own, so that a process's big launches are worked out side
by side (:func:`each`); the summary pools them in launch order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from ..model.trace import Launch
from . import enclosing
from .stats import any_distinct
from .stats import ints as _ints


@dataclass
class LaunchPart:
    """What a kernel's summary needs of one launch, worked out on its own (:func:`one`)."""

    durations: dict[int, list]
    kinds: dict[int, set[int]]
    offsets: dict[int, list]
    counts: Counter[int]
    warp_times: Any


def one(launch: Launch) -> LaunchPart:
    """One launch's range durations and kinds and mark offsets by name, its mark counts and
    warp lifetimes: numpy over the launch's columns, most of it outside the GIL."""
    durations: dict[int, list] = defaultdict(list)
    offsets: dict[int, list] = defaultdict(list)
    counts: Counter[int] = Counter()
    r, w = launch.ranges, launch.warps
    names = _ints(r.name)
    _group(names, _ints(r.end) - _ints(r.start), durations)
    _count(_ints(launch.markers.name), counts)
    _mark_offsets(launch, offsets)
    return LaunchPart(durations, _kinds(names, _ints(r.kind)), offsets, counts, _ints(w.end) - _ints(w.start))


def _kinds(names, kinds) -> dict[int, set[int]]:
    """The range kinds each name was seen with: the distinct (name, kind) pairs, counted, not
    each name's kinds gathered and sorted (a million ranges of one name, one kind)."""
    import numpy as np

    if not len(names):
        return {}
    low = int(kinds.min())
    span = int(kinds.max()) - low + 1
    pairs = any_distinct(names * span + (kinds - low))
    found: dict[int, set[int]] = defaultdict(set)
    for name, kind in zip(*np.divmod(pairs, span), strict=True):
        found[int(name)].add(int(kind) + low)
    return found


#: Launches of more events than this between them are worked out side by side, one thread
#: each (numpy's sorts and searches let go of the GIL): the summary of a process's assembled
#: trace is the last step of a big ``--format all`` decode (docs/history/benchmarks.md).
SIDE_BY_SIDE_EVENTS = 1 << 20


def each(launches: list[Launch]) -> list[LaunchPart]:
    """Each launch's part, side by side where they are several and big."""
    events = sum(len(launch.ranges) + len(launch.markers) for launch in launches)
    if len(launches) < 2 or events < SIDE_BY_SIDE_EVENTS:
        return [one(launch) for launch in launches]
    import os
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(len(launches), os.cpu_count() or 1)) as pool:
        return list(pool.map(one, launches))


def _count(names, into: Counter) -> None:
    """Add each name's count to ``into``, new names in first-seen order (as ``Counter.update``
    would, without a Python step per mark: a big launch has a million)."""
    import numpy as np

    if not len(names):
        return
    found, first, count = np.unique(names, return_index=True, return_counts=True)
    for at in np.argsort(first, kind="stable").tolist():
        into[int(found[at])] += int(count[at])


def _group(keys, values, into: dict[int, list]) -> None:
    """Append ``values`` to ``into[key]`` per distinct key, first-seen key order kept."""
    import numpy as np

    if not len(keys):
        return
    # one sort, not one pass per key (names can be many); numpy sorts 16-bit keys stably by
    # radix, ten times quicker than int64s
    small = int(keys.min()) >= 0 and int(keys.max()) < 1 << 16
    order = np.argsort(keys.astype(np.uint16) if small else keys, kind="stable")
    ordered = keys[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    groups = np.split(order, cuts)
    for group in sorted(groups, key=lambda rows: rows[0]):  # first-seen order
        into[int(keys[group[0]])].append(values[group])


def _mark_offsets(launch: Launch, offsets: dict[int, list]) -> None:
    """Each mark's offset from the start of the innermost range of its warp that holds it
    (:func:`~iket_cli.analysis.enclosing.innermost`), appended to ``offsets[name]``."""
    marks, held = enclosing.innermost(launch)
    if len(marks):
        m_ts, m_name = _ints(launch.markers.start), _ints(launch.markers.name)
        _group(m_name[marks], m_ts[marks] - _ints(launch.ranges.start)[held], offsets)
