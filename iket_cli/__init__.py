"""iket: capture, keep and read NVIDIA IKET in-kernel timelines.

The Python API::

    import iket_cli
    capture = iket_cli.profile("profile_affine.py:workload", output_dir="iket-affine")
    capture.trace_json, capture.perfetto, capture.manifest["processes"]

Attributes are imported on first use, so ``import iket_cli`` stays cheap.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

_LAZY = {
    "profile": ("capture", "profile"),
    "Capture": ("capture", "Capture"),
    "Process": ("capture", "Process"),
    "Target": ("targets", "Target"),
    "IketError": ("errors", "IketError"),
    "ExitCode": ("errors", "ExitCode"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'iket_cli' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(f".{module}", __name__), attr)
    globals()[name] = value
    return value
