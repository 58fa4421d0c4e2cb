"""One dispatch from a reading command's ``--format`` to the writer of its value.

A reading command names its value's kind and the format, nothing else (no ``if fmt ==
"json"`` in cli/): the writers of kind ``K`` are ``render/K.py``'s ``WRITERS`` (``--format``
-> ``writer(value, out)``), so a new reading command brings one render module and touches no
table here. The kinds whose writers live elsewhere are listed in :data:`ELSEWHERE`."""

from __future__ import annotations

import importlib
from typing import IO, Any

#: Kinds whose writers are not ``render/<kind>.py``'s ``WRITERS``: (module, table).
ELSEWHERE: dict[str, tuple[str, str]] = {
    "summary": ("tables", "RENDERERS"),  # iket show: analysis.summary's processes
    "payloads": ("tables", "PAYLOAD_WRITERS"),  # iket show --payload
}


def write(kind: str, value: Any, fmt: str, out: IO[str]) -> None:
    """Write ``value`` (a reading command's result of ``kind``: ``lint``, ``diff``,
    ``pipeline``, ``results`` of ``iket sql``, ``summary``, ``payloads``) to ``out`` in ``fmt``."""
    module, table = ELSEWHERE.get(kind, (kind, "WRITERS"))
    writers = getattr(importlib.import_module(f"{__package__}.{module}"), table)
    writers[fmt](value, out)
