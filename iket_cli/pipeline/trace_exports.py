"""The Perfetto exports of a folder that holds JSON traces and no raw capture.

An in-process window (``iket_cli.window``, ``--window``) saves the trace JSON and nothing
NVIDIA's decoder could read; a folder of JSON traces copied without its ``iket/`` is the
same. Their ``.pftrace`` (and the report's gzip'd copy) are written from the JSON by
:mod:`iket_cli.render.perfetto`, the trace NVIDIA's export would have been. A trace in another
layout than the decoder's (the session's ``SaveTrace`` indents it) is first rewritten in the
decoder's (:func:`compact`).
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path

from ..model import atomic
from ..model import trace as trace_mod
from ..model.vocab import artifact_name, pid_of, trace_glob

#: gzip's level for the report's copy: the decoder's default (its ``gzip.compress``).
GZIP_LEVEL = 9


def traces_in(capture_dir: Path) -> list[Path]:
    """The folder's JSON traces, by name."""
    return sorted(p for p in capture_dir.glob(trace_glob()) if p.is_file())


def compact(path: Path) -> bool:
    """Rewrite a trace JSON in the decoder's layout (keys sorted, no spaces) where it is not:
    the in-process session's ``SaveTrace`` indents its JSON (seen on the H100), which the
    trace model reads only by ``json.load``, slowly, and not above
    :data:`~iket_cli.model.trace.MAX_GENERAL_BYTES`. True where it was rewritten."""
    import json

    with open(path, "rb") as handle:
        if handle.read(len(trace_mod.DECODER_HEAD)) == trace_mod.DECODER_HEAD:
            return False
    with open(path, "rb") as handle:
        try:
            doc = json.load(handle)
        except (ValueError, RecursionError):
            return False  # not JSON (or nested too deep to read): the reader names the problem
    try:
        data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate (``\udcff``): kept as JSON spells it
        data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    atomic.write(path, data)
    return True


def write(
    capture_dir: Path,
    formats: list[str],
    loaded: Mapping[str, trace_mod.Trace] | None = None,
    *,
    hold: int = 0,
) -> dict[str, trace_mod.Trace]:
    """Write each JSON trace's Perfetto trace (``perfetto``) and its gzip'd copy (``html``).
    ``loaded``: traces already read, by file name (not read again). The last ``hold`` traces
    it read or was given, by file name, for the lint and the report after it (the others are
    let go as it goes: a capture of many processes is never held whole). A trace that cannot
    be read raises the reader's error."""
    from ..render import perfetto

    held: dict[str, trace_mod.Trace] = {}
    for path in traces_in(capture_dir):
        compact(path)
    if "perfetto" not in formats and "html" not in formats:
        return held
    for path in traces_in(capture_dir):
        pid_hex = pid_of(path.name)
        given = (loaded or {}).get(path.name)
        trace = given if given is not None else trace_mod.load(path)
        data = perfetto.encode(trace)
        if hold:
            held[path.name] = trace
            while len(held) > hold:
                del held[next(iter(held))]
        if "perfetto" in formats:
            atomic.write(capture_dir / artifact_name(pid_hex, "perfetto"), data)
        if "html" in formats:
            packed = gzip.compress(data, GZIP_LEVEL)
            atomic.write(capture_dir / artifact_name(pid_hex, "pftrace_gz"), packed)
    return held
