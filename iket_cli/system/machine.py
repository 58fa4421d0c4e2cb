"""Versions and the GPU, learned without importing torch or TIRx into the CLI.

The GPU's name and driver come from ``nvidia-smi`` where it answers; the query runs in a
thread beside the capture so that it adds nothing to the wall time.
"""

from __future__ import annotations

import platform
import shutil
import threading
from typing import Any

from .._version import __version__
from ..errors import IketError
from . import spawn

NVIDIA_SMI_TIMEOUT_S = 10.0


def query_gpus() -> list[dict[str, str]]:
    """``[{"index", "name", "driver"}]`` from nvidia-smi; empty where it is absent or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    query = [smi, "--query-gpu=index,name,driver_version", "--format=csv,noheader"]
    try:
        out = spawn.run(query, timeout=NVIDIA_SMI_TIMEOUT_S)
    except IketError:
        return []
    if out.returncode != 0:
        return []
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            gpus.append({"index": parts[0], "name": parts[1], "driver": parts[2]})
    return gpus


class GpuQuery:
    """``query_gpus()`` started now, collected later."""

    def __init__(self) -> None:
        self._result: list[dict[str, str]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._result = query_gpus()

    def result(self) -> list[dict[str, str]]:
        self._thread.join(NVIDIA_SMI_TIMEOUT_S)
        return self._result


def versions(run_iket_version: str | None, gpus: list[dict[str, str]]) -> dict[str, Any]:
    """The ``versions`` block of the manifest."""
    return {
        "iket_cli": __version__,
        "run_iket": run_iket_version,
        "python": platform.python_version(),
        "gpus": gpus,
    }
