"""Durations and sizes as people read and write them."""

from __future__ import annotations

import re

from ..errors import UsageError

_SIZE = re.compile(r"\s*(\d+)\s*([kKmMgG]?)[iI]?[bB]?\s*")


def duration(ns: float | None) -> str:
    """A duration in the unit that reads best: 224 ns, 3.52 µs, 1.20 ms, 2.00 s."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def human_bytes(size: int) -> str:
    """``5.8 KiB``, ``2.0 GiB``: sizes in the binary units run-iket's options use."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def parse_size(text: str) -> int:
    """``512M``, ``2G``, ``4096`` -> bytes (k, M, G are powers of 1024, as run-iket's)."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise UsageError(f"{text!r} is not a size", hint="a number of bytes, optionally with k, M or G")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(match.group(1)) * scale


_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*")
_NS = {"ns": 1, None: 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def parse_duration(value: str | float) -> float:
    """``"5us"``, ``"300ns"``, ``"1.5 ms"``, ``2000`` (ns) -> nanoseconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise UsageError(
            f"{value!r} is not a duration", hint="a number of ns, or with ns, us, ms or s: e.g. 5us"
        )
    return float(match.group(1)) * _NS[match.group(2)]
