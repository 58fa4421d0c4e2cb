"""Instrumentation lint: the quiet ways an IKET capture goes wrong, found in its trace.

* ``empty-launch``: a launch of an instrumented kernel with no event at all, most often a
  kernel loaded from a compile cache (not instrumented);
* ``many-names``: more than 30 distinct event names in one kernel, which switches IKET to
  a costlier encoding;
* ``long-name``: a name within 4 bytes of IKET's 32-byte limit (longer ones are refused);
* ``resolution``: most of a kernel's ranges last no more than one step of the GPU timer
  (32 ns on the H200), so their durations are mostly quantisation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..model.trace import Trace
from ..model.vocab import TIMER_STEP_NS

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
