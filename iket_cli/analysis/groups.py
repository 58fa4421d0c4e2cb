"""``iket show --by``: a trace split into groups (launch, CTA, warp, SM or warp role), each
a trace of its own that the summary then describes."""

from __future__ import annotations

from ..model import trace as trace_mod
from ..model.annotations import Roles
from ..model.trace import Trace

_LOCATION_KEY = {"cta": "ctaId", "warp": "warpId", "sm": "smId"}


def groups(
    trace: Trace, by: str, roles: Roles | None = None, quiet: frozenset | set = frozenset()
) -> list[tuple[str, Trace]]:
    if by == "kernel":
        return [("", trace)]
    if by == "role" and roles is not None:
        present = {w["warpId"] for w in trace.locations if isinstance(w, dict)}
        groups = [  # each role's warps among those present, by comparison: never a range's set
            (f"role {name}", trace_mod.select(trace, warps={w for w in present if first <= w < end}))
            for name, (first, end) in roles.warps.items()
        ]
        rest = {w for w in present if roles.role(w) is None}
        return groups + ([("role none", trace_mod.select(trace, warps=rest))] if rest else [])
    if by == "launch":
        return [
            (f"launch {n}", Trace(trace.path, [launch], trace.strings, trace.locations))
            for n, launch in enumerate(trace.launches)
        ]
    key = _LOCATION_KEY[by]
    used = {
        i
        for launch in trace.launches
        for i in (launch.warps.loc if launch.kernel in quiet else launch.ranges.loc)
        if 0 <= i < len(trace.locations)
    }
    values = sorted({_hashable(trace.locations[i][key]) for i in used})
    return [(f"{by} {text(value)}", trace_mod.select(trace, **{by: value})) for value in values]


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
