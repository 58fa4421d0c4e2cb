"""What an ``@pytest.mark.iket`` asks for, checked before its window opens: the gates (each a
``{range: limit}`` with a duration per range), the window's options, and the calls of one
function to window (``function="kernels:launch", calls="3"``). A mark that asks for something
iket cannot do fails its test with one line naming the key, never a Python traceback."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..capture.in_process import session
from ..capture.saved_calls.extract import parse_calls
from ..errors import UsageError
from ..model.units import parse_duration
from ..model.vocab import LOG_LEVELS, POSTPROCESS_CHOICES

#: The mark's gates: the statistic each limits.
GATES = ("max", "p50", "p90", "p99", "mean", "min")
#: The window's options a mark may set (the plugin chooses the folder and clobbers it itself).
WINDOW_OPTIONS = ("max_ts_cnt_per_warp", "context_buffer_size", "log_level", "postprocess", "library")
#: Which calls of one function are windowed (``%%iket --function``'s, as keywords).
CALL_OPTIONS = ("function", "calls")
KNOWN = (*GATES, *WINDOW_OPTIONS, *CALL_OPTIONS)


@dataclass(frozen=True)
class Asked:
    """A mark's request, checked: gates as ``{stat: {range: ns}}``, the window's options, the
    function whose calls are windowed (None: the whole test) and which calls."""

    gates: dict[str, dict[str, float]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    function: str | None = None
    calls: str = "1"


def asked(args: tuple, kwargs: dict[str, Any]) -> Asked:
    """The mark's arguments checked; a :class:`UsageError` naming the first thing wrong."""
    if args:
        raise UsageError(
            f"@pytest.mark.iket takes keywords only (got {args[0]!r})",
            hint="e.g. @pytest.mark.iket(max={'mainloop': '5us'})",
        )
    unknown = [key for key in kwargs if key not in KNOWN]
    if unknown:
        raise UsageError(f"@pytest.mark.iket: unknown keyword {unknown[0]!r}", hint=f"use {', '.join(KNOWN)}")
    gates = {stat: _limits(stat, kwargs[stat]) for stat in GATES if stat in kwargs}
    options = {key: kwargs[key] for key in WINDOW_OPTIONS if key in kwargs}
    session.budget_of(options.get("max_ts_cnt_per_warp"), "max_ts_cnt_per_warp=")
    session.buffer_of(options.get("context_buffer_size"), "context_buffer_size=")
    if options.get("log_level", "warn") not in LOG_LEVELS:
        raise UsageError(f"log_level={options['log_level']!r} is not a level", hint=", ".join(LOG_LEVELS))
    if options.get("postprocess", "all") not in POSTPROCESS_CHOICES:
        raise UsageError(
            f"postprocess={options['postprocess']!r} is not a choice", hint=", ".join(POSTPROCESS_CHOICES)
        )
    function, calls = kwargs.get("function"), kwargs.get("calls")
    if calls is not None and function is None:
        raise UsageError("calls= chooses calls of function=", hint="add function='MODULE:FUNC'")
    if function is not None and (not isinstance(function, str) or ":" not in function):
        raise UsageError(f"function={function!r} is not MODULE:FUNC", hint="e.g. function='kernels:launch'")
    chosen = "1" if calls is None else str(calls)
    if function is not None and parse_calls(chosen) == "last":
        raise UsageError("calls='last' cannot open a window: it opens as its call begins", hint="N or A-B")
    return Asked(gates, options, function, chosen)


def _limits(stat: str, given: Any) -> dict[str, float]:
    """One gate's limits, each in ns."""
    if not isinstance(given, dict) or not given:
        raise UsageError(
            f"{stat}={given!r} is not a gate", hint=f"{stat}={{'RANGE': '5us'}}: a limit for each range named"
        )
    limits = {}
    for name, limit in given.items():
        try:
            limits[str(name)] = parse_duration(limit)
        except UsageError as error:
            raise UsageError(f"{stat}={{{name!r}: {limit!r}}}: {error.message}", hint=error.hint) from None
    return limits
