"""Instrumentation lint: the quiet ways an IKET capture goes wrong, found in its trace.

* ``empty-launch``: a launch of an instrumented kernel with no event at all, most often a
  kernel loaded from a compile cache (not instrumented);
* ``many-names``: more than 30 distinct event names in one kernel, which switches IKET to
  a costlier encoding;
* ``long-name``: a name within 4 bytes of IKET's 32-byte limit (longer ones are refused);
* ``resolution``: most of a kernel's ranges last no more than one step of the GPU timer
  (32 ns on the H200), so their durations are mostly quantisation;
* ``payload-type``: an event name recorded with payloads of different types (or with and
  without one), or a token range whose end carries another type than its start: its
  values cannot be read together.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..model.trace import Trace
from ..model.vocab import PAYLOAD_TYPES, TIMER_STEP_NS
from .payloads import type_conflicts

NAME_LIMIT_BYTES = 32
NAME_MARGIN_BYTES = 4
MAX_CHEAP_NAMES = 30
CACHE_HINT = (
    "a kernel loaded from a compile cache is not instrumented: set CUTE_DSL_NO_CACHE=1 or "
    "CUTE_DSL_DISABLE_FILE_CACHING=1 for CuTe DSL, or clear the TIRx cache"
)


@dataclass
class Finding:
    code: str
    kernel: str
    message: str
    hint: str

    def to_dict(self) -> dict:
        return asdict(self)


def lint(trace: Trace) -> list[Finding]:
    """Every finding for ``trace``, kernel by kernel, in launch order."""
    findings: list[Finding] = []
    kernels: dict[str, list] = {}
    for number, launch in enumerate(trace.launches):
        kernels.setdefault(launch.kernel, []).append(launch)
        if not len(launch.ranges) and not len(launch.markers):
            findings.append(
                Finding(
                    "empty-launch",
                    launch.kernel,
                    f"launch {number} of {launch.kernel} recorded no event",
                    CACHE_HINT,
                )
            )
    for kernel, launches in kernels.items():
        findings += _payload_types(trace, kernel, launches)
        names = {
            trace.name(i)
            for launch in launches
            for col in (launch.ranges, launch.markers)
            for i in set(col.name)
        }
        if len(names) > MAX_CHEAP_NAMES:
            findings.append(
                Finding(
                    "many-names",
                    kernel,
                    f"{kernel} uses {len(names)} distinct event names (over {MAX_CHEAP_NAMES})",
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
        durations = [
            e - s for launch in launches for s, e in zip(launch.ranges.start, launch.ranges.end, strict=True)
        ]
        short = sum(1 for d in durations if d <= TIMER_STEP_NS)
        if durations and short * 2 > len(durations):
            findings.append(
                Finding(
                    "resolution",
                    kernel,
                    f"{short} of {len(durations)} ranges in {kernel} last {TIMER_STEP_NS} ns or less",
                    "at the timer's resolution: widen the ranges (more work inside each) to measure them",
                )
            )
    return findings


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
            "give each event name one payload type (a range_end the same as its range_start): "
            "its values are read together",
        )
        for (kind, index), types in conflicts.items()
    ]
