"""Payloads as the trace model keeps them: read off the decoder's JSON, as their values.

CuTe DSL's marks and token ranges may carry a value (``payloadType``, ``payloadVal``); the
decoder writes floating-point payloads as their bit pattern (on the H200, an FP32 32.0 as
1107296256) and may write signed integers unsigned. Columns: see
:class:`iket_cli.model.trace.Columns`.
"""

from __future__ import annotations

import struct
from array import array


def drop_if_empty(columns: list) -> None:
    """A trace without any payload keeps no payload columns (as the numpy reader gives it)."""
    if any(any(c.ptype) or any(c.ptype_end) for c in columns):
        return
    for c in columns:
        c.ptype, c.pval, c.ptype_end, c.pval_end = array("i"), array("d"), array("i"), array("d")


def append(columns, event: dict, *, end: bool = False) -> None:
    """Append an event's payload (type 0 and 0.0 where it has none) to the payload columns."""
    kind = event.get("payloadType", 0)
    value = event.get("payloadVal", 0) if kind else 0
    if not isinstance(kind, int) or not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError("a payload that is not a number")
    (columns.ptype_end if end else columns.ptype).append(kind)
    (columns.pval_end if end else columns.pval).append(payload_value(kind, value))


#: Signed integer payload types and their widths: the decoder may write them unsigned.
_SIGNED_BITS = {1: 8, 3: 16, 5: 32, 7: 64}
#: Floating-point payload types the decoder writes as their bit pattern, and how to read it.
_FLOAT_BITS = {13: ("<I", "<f"), 14: ("<Q", "<d"), 11: ("<H", "<e")}


def payload_value(kind: int, raw: int | float) -> float:
    """A payload as its value: FP32/FP64/FP16/BF16 come as bit patterns (seen on the H200:
    32.0 as 1107296256), signed integers possibly unsigned. FP8 and FP4 stay raw bits (their
    encoding is not in the trace)."""
    if isinstance(raw, float) or kind not in (*_SIGNED_BITS, *_FLOAT_BITS, 12):
        return float(raw)
    if kind in _SIGNED_BITS:
        bits = _SIGNED_BITS[kind]
        return float(raw - (1 << bits) if raw >= 1 << (bits - 1) else raw)
    if kind == 12:  # bf16: the top half of an fp32
        raw, kind = (raw & 0xFFFF) << 16, 13
    pack, unpack = _FLOAT_BITS[kind]
    try:
        return struct.unpack(unpack, struct.pack(pack, raw))[0]
    except struct.error:
        return float(raw)  # not a bit pattern of that width: keep what was written
