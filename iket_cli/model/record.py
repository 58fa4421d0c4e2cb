"""The one builder of a manifest record, and of the error record inside it.

``iket profile``, ``iket postprocess`` (for a folder that raw run-iket made) and
``iket merge`` all build their ``manifest.json`` here, so every manifest has the same keys
in the same order, whichever command wrote it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..errors import IketError
from .manifest import SCHEMA_VERSION
from .vocab import INSTRUMENTED, LOG_NAME


def build(
    *,
    status: str,
    mode: str | None = None,
    target: dict[str, Any],
    cwd: str,
    started_at: datetime | str,
    finished_at: datetime | str,
    duration_s: float,
    versions: dict[str, Any],
    postprocess: list[str],
    processes: list[dict[str, Any]],
    keep: bool,
    error: IketError | dict[str, Any] | None = None,
    command: list[str] | None = None,
    argv: list[str] | None = None,
    run_iket_argv: list[str] | None = None,
    phases: dict[str, float | None] | None = None,
    log: str | None = LOG_NAME,
    **extra: Any,
) -> dict[str, Any]:
    """A manifest record (schema version 1); ``extra`` keys follow the common ones.

    ``log`` is the console log inside the capture, None where there is none (a folder that
    raw run-iket made: no iket command ran the passes). ``mode`` is what the capture pass
    recorded (vocab.MODES; default: instrumented).
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "mode": mode or INSTRUMENTED,
        "error": error_record(error) if isinstance(error, IketError) else error,
        "target": target,
        "command": command,
        "argv": list(argv or []),
        "run_iket_argv": list(run_iket_argv or []),
        "cwd": cwd,
        "started_at": _timestamp(started_at),
        "finished_at": _timestamp(finished_at),
        "duration_s": duration_s,
        "phases": dict(phases or {}),
        "versions": versions,
        "postprocess": list(postprocess),
        "keep": keep,
        **extra,
        "log": log,
        "processes": processes,
    }


def error_record(error: IketError) -> dict[str, Any]:
    """What the manifest says of a failure: the real exception class, message, phase, exit code."""
    return {
        "type": type(error).__name__,
        "message": error.message,
        "phase": getattr(error, "phase", None),
        "exit_code": int(error.exit_code),
    }


def _timestamp(value: datetime | str) -> str:
    return value if isinstance(value, str) else value.isoformat(timespec="milliseconds")
