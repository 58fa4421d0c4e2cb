"""Instrumentation lint: the quiet ways an IKET capture goes wrong, found in its trace.

* the capture's losses (its completeness record, :mod:`iket_cli.model.completeness`), each
  a finding named for its cause: ``budget-drop``, ``graph-launch``, ``untraced-launch`` ...;
* ``empty-launch``: a launch of an instrumented kernel with no event at all whose cause no
  source names (a budget below what the kernel emits, a kernel loaded from a compile cache,
  annotations on a path not taken: the hint lists them). Not checked in a ``--warp-trace``
  capture, which records no event by design (nor in a trace that has none at all and
  nothing beside it to say it was instrumented);
* ``many-names``: more than 30 distinct event names in one kernel, which switches IKET to
  a costlier encoding;
* ``long-name``: a name within 4 bytes of IKET's 32-byte limit (longer ones are refused);
* ``resolution``: most of a kernel's ranges last no more than one step of the GPU timer
  (32 ns on the H200), so their durations are mostly quantisation;
* ``payload-type``: an event name given payloads of different types (or with and without
  one), or a token range whose end carries another type than its start. IKET keeps one
  payload type per name and reads every value with it, so the trace cannot show this: the
  types come from iket's start-up hook, which notes them as CuTe DSL compiles the kernel
  (the manifest's ``payload_sites``); a trace that does show two types is flagged too;
* ``unmatched``: a ``range_start`` whose token never reached ``range_end``, a ``range_push``
  never popped, a ``range_pop`` without a push. The decoder drops them silently; the raw
  capture still counts them (:mod:`iket_cli.model.rawevents`), so this needs the raw capture
  (``--keep``, or right after a capture, when iket records the finding in the manifest).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..model import rawevents
from ..model.completeness import LINT_CODES, UNKNOWN
from ..model.folder import Beside, beside
from ..model.names import short as short_name
from ..model.reading import Opened
from ..model.trace import Trace
from ..model.vocab import PAYLOAD_TYPES, PUSH_POP, START_END, TIMER_STEP_NS, WARP_TRACE
from .completeness import EMPTY_CANDIDATES, shown_too
from .launches import mode_of
from .payloads import type_conflicts
from .stats import any_distinct

NAME_LIMIT_BYTES = 32
NAME_MARGIN_BYTES = 4
MAX_CHEAP_NAMES = 30
#: Findings that need the raw capture: recorded in the manifest, they stand once it is gone.
RAW_CODES = ("unmatched",)
UNMATCHED_HINT = (
    "end every range_start's token with range_end on every path (a sentinel_token carries one "
    "across loop iterations) and pop every push before the kernel returns"
)
PAYLOAD_HINT = (
    "give each event name one payload type (a range_end the same as its range_start): "
    "its values are read together"
)
UNPAIRED_HINT = (
    "give both stages a payload (the tile or stage index: range_start(name, payload)) so that iket "
    "pairs them by it, or let every warp of both stages run as many instances"
)
EMPTY_HINT = "look for: " + "; ".join(EMPTY_CANDIDATES)


@dataclass
class Finding:
    code: str
    kernel: str
    message: str
    hint: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Linted:
    """One process of a capture, linted: its label, its trace, the findings."""

    process: str
    trace: str
    findings: list[Finding]

    def to_dict(self) -> dict:
        findings = [f.to_dict() for f in self.findings]
        return {"process": self.process, "trace": self.trace, "findings": findings}


def lint_capture(opened: Opened) -> list[Linted]:
    """Every process of an opened capture, linted (each trace loaded in turn)."""
    return [
        Linted(found.label, str(found.path), lint_file(found.path, trace, found.beside))
        for found, trace in opened.unfiltered()
    ]


def lint_file(path: Path, trace: Trace, context: Beside | None = None) -> list[Finding]:
    """:func:`lint` of the trace at ``path`` with what its capture folder adds (``context``;
    read here where not given): the payload types compiled, the raw capture's counts, or
    else the raw findings recorded at capture, and the DAG edges whose arrows no rule could
    pair."""
    from ..model.annotations import dags_for
    from .flows import pair

    found = beside(path) if context is None else context
    raw = rawevents.read(found.raw) if found.raw else None
    sites = (found.process or {}).get("payload_sites")
    dags = dags_for(path)
    unpaired = pair(trace, dags).undecided if dags else []
    losses = shown_too(found.losses, trace)
    findings = lint(trace, raw=raw, sites=sites, mode=found.mode, unpaired=unpaired, losses=losses)
    if raw is None:
        findings += [
            Finding(f["code"], f["kernel"], f["message"], f["hint"])
            for f in found.recorded_lint
            if f.get("code") in RAW_CODES
        ]
    return findings


def lint(
    trace: Trace,
    *,
    raw: rawevents.RawEvents | None = None,
    sites: list[dict[str, Any]] | None = None,
    mode: str | None = None,
    unpaired: list | None = None,
    losses: list[dict[str, Any]] | None = None,
) -> list[Finding]:
    """Every finding for ``trace``, kernel by kernel, in launch order; ``raw`` (the raw
    capture's event counts) adds ``unmatched``, ``sites`` (the payload types compiled)
    the ``payload-type`` findings the trace cannot show. ``mode`` is the capture's
    (vocab.MODES; None: unknown, then a trace without any event is taken for a warp trace).
    ``unpaired`` (analysis/flows.Undecided) are DAG edges no rule could pair: ``unpaired-edge``.
    ``losses``: the capture's completeness record for this trace: a finding each, and no
    ``empty-launch`` for a kernel whose loss it already names."""
    findings: list[Finding] = [_lost(loss) for loss in losses or []]
    findings += _compiled_payload_types(trace, sites or [])
    findings += [_unpaired(u) for u in unpaired or []]
    kernels: dict[str, list] = {}
    events = mode_of(trace, mode) != WARP_TRACE
    told = {loss["kernel"] for loss in losses or []}
    for number, launch in enumerate(trace.launches):
        kernels.setdefault(launch.kernel, []).append(launch)
        if events and not _has_events(launch) and launch.kernel not in told:
            findings.append(
                Finding(
                    "empty-launch",
                    launch.kernel,
                    f"launch {number} of {short_name(launch.kernel)} recorded no event",
                    EMPTY_HINT,
                )
            )
    for kernel, launches in kernels.items():
        findings += _payload_types(trace, kernel, launches)
        if raw is not None and kernel in raw.kernels:
            findings += _unmatched(trace, kernel, launches, raw)
        names = {
            trace.name(i)
            for launch in launches
            for col in (launch.ranges, launch.markers)
            for i in _distinct(col.name)
        }
        if len(names) > MAX_CHEAP_NAMES:
            findings.append(
                Finding(
                    "many-names",
                    kernel,
                    f"{short_name(kernel)} uses {len(names)} distinct event names (over {MAX_CHEAP_NAMES})",
                    "IKET switches to a costlier encoding above 30 names: merge or drop some",
                )
            )
        for name in sorted(names):
            size = len(name.encode("utf-8"))
            if size > NAME_LIMIT_BYTES - NAME_MARGIN_BYTES:
                findings.append(
                    Finding(
                        "long-name",
                        kernel,
                        f"event name {name!r} is {size} bytes (limit {NAME_LIMIT_BYTES})",
                        "shorten it: names over 32 bytes are refused",
                    )
                )
        durations = _durations(launches)
        short = int((durations <= TIMER_STEP_NS).sum())
        if len(durations) and short * 2 > len(durations):
            findings.append(
                Finding(
                    "resolution",
                    kernel,
                    f"{short} of {len(durations)} ranges in {short_name(kernel)} last "
                    f"{TIMER_STEP_NS} ns or less",
                    "at the timer's resolution: widen the ranges (more work inside each) to measure them",
                )
            )
    return findings


def _lost(loss: dict[str, Any]) -> Finding:
    """A loss of the completeness record, as a finding named for its cause."""
    code = LINT_CODES.get(loss["cause"], LINT_CODES[UNKNOWN])
    return Finding(code, loss["kernel"], f"INCOMPLETE: {loss['message']}", loss["fix"])


def _unpaired(undecided) -> Finding:
    """A DAG edge drawn without arrows somewhere: said by name, with the counts that stopped it."""
    return Finding(
        "unpaired-edge",
        undecided.kernel,
        f"DAG edge {undecided.label}: no arrows in {undecided.ctas} CTA(s) of launch {undecided.launch} of "
        f"{short_name(undecided.kernel)}: instances per warp differ ({undecided.label.split(' -> ')[0]}: "
        f"{', '.join(map(str, undecided.source_counts))}; {undecided.label.split(' -> ')[1]}: "
        f"{', '.join(map(str, undecided.target_counts))}) and not every instance carries a payload",
        UNPAIRED_HINT,
    )


def _has_events(launch) -> bool:
    return bool(len(launch.ranges) or len(launch.markers))


def _payload_types(trace: Trace, kernel: str, launches: list) -> list[Finding]:
    """One finding per event name of this kernel whose payloads are of several types."""
    conflicts: dict[tuple[str, int], set[int]] = {}
    for launch in launches:
        for kind, columns in (("range", launch.ranges), ("mark", launch.markers)):
            for index, types in type_conflicts(columns, kind):
                conflicts.setdefault((kind, index), set()).update(types)
    return [
        Finding(
            "payload-type",
            kernel,
            f"{kind} {trace.name(index)!r} carries payloads of types "
            + ", ".join(PAYLOAD_TYPES.get(t) or ("none" if t == 0 else f"type {t}") for t in sorted(types)),
            PAYLOAD_HINT,
        )
        for (kind, index), types in conflicts.items()
    ]


def _compiled_payload_types(trace: Trace, sites: list[dict[str, Any]]) -> list[Finding]:
    """One finding per event name compiled with payloads of several types (or with and
    without one); the kernel is the one whose trace holds the name, where one does."""
    types: dict[str, set[str]] = {}
    for site in sites:
        types.setdefault(site["name"], set()).add(site["type"] or "none")
    found = []
    for name, kinds in sorted(types.items()):
        if len(kinds) < 2:
            continue
        index = trace.strings.index(name) if name in trace.strings else -1
        kernel = next(
            (
                launch.kernel
                for launch in trace.launches
                if index in set(launch.ranges.name) or index in set(launch.markers.name)
            ),
            "",
        )
        found.append(
            Finding(
                "payload-type",
                kernel,
                f"{name!r} is compiled with payloads of types {', '.join(sorted(kinds))}: IKET keeps "
                "one type per name and reads every value as that type, so the others are misread",
                PAYLOAD_HINT,
            )
        )
    return found


def _tally(names, kinds) -> dict[tuple[int, int], int]:
    """How many records carry each (name index, kind) pair (kind 0 where ``kinds`` is None),
    counted by numpy: a big capture has millions of records, too many for a Python loop."""
    import numpy as np

    name = np.asarray(names, np.int64)
    kind = np.zeros_like(name) if kinds is None else np.asarray(kinds, np.int64)
    if not len(name) or len(kind) != len(name):
        return {}
    low, span = int(kind.min()), int(kind.max() - kind.min()) + 1
    codes, counts = np.unique(name * span + (kind - low), return_counts=True)  # one key per pair
    return {
        (int(code) // span, int(code) % span + low): int(count)
        for code, count in zip(codes.tolist(), counts.tolist(), strict=True)
    }


def _distinct(values) -> list[int]:
    """The distinct values of an index column (numpy's, not a Python set of a million ints)."""
    return any_distinct(values).tolist()


def _durations(launches: list):
    """Every range's duration (end - start) in ``launches``, as one numpy array."""
    import numpy as np

    spans = [np.asarray(x.ranges.end, np.int64) - np.asarray(x.ranges.start, np.int64) for x in launches]
    return np.concatenate(spans) if spans else np.zeros(0, np.int64)


def _unmatched(trace: Trace, kernel: str, launches: list, raw: rawevents.RawEvents) -> list[Finding]:
    """Raw events of ``kernel`` that no decoded range accounts for; nothing when the raw counts
    disagree with the trace in a way pairing cannot explain (the raw layout was misread)."""
    decoded: Counter = Counter()
    marks: Counter = Counter()
    for launch in launches:
        for (name, kind), count in _tally(launch.ranges.name, launch.ranges.kind).items():
            decoded[(trace.name(name), kind)] += count
        for (name, _), count in _tally(launch.markers.name, None).items():
            marks[trace.name(name)] += count
    counts = raw.kernels[kernel]
    recorded_marks = Counter({n: c for (n, pos), c in counts.items() if pos == rawevents.MARK})
    if recorded_marks != marks:
        return []
    loose: list[tuple[str, int]] = []
    for (name, position), count in sorted(counts.items()):
        if position == rawevents.START_END:
            extra = count - 2 * decoded[(name, START_END)]
            loose.append((f"range_start or range_end of {name!r} without its partner", extra))
        elif position == rawevents.PUSH:
            loose.append((f"range_push({name!r}) never popped", count - decoded[(name, PUSH_POP)]))
        elif position == rawevents.POP:
            pushed = sum(c for (_, kind), c in decoded.items() if kind == PUSH_POP)
            loose.append(("range_pop() without a range_push", count - pushed))
    if any(extra < 0 for _, extra in loose):
        return []
    full = f" ({raw.full_warps:,} warps filled their trace buffer)" if raw.full_warps else ""
    return [
        Finding(
            "unmatched",
            kernel,
            f"{what}: {extra} in {short_name(kernel)}, dropped by the decoder{full}",
            UNMATCHED_HINT,
        )
        for what, extra in loose
        if extra > 0
    ]
