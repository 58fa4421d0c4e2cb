"""iket: capture, keep and read NVIDIA IKET in-kernel timelines.

The Python API::

    import iket_cli
    capture = iket_cli.profile("profile_affine.py:workload", output_dir="iket-affine")
    with iket_cli.window("iket-step") as w:    # in this process: no relaunch, no tracker pass
        model.train_step(batch)
    capture.trace_json, capture.perfetto, capture.manifest["processes"]
    capture.tables()["ranges"].to_pandas()     # with pip install 'iket-cli[sql]'
    capture.to_duckdb().sql("SELECT name, median(duration_ns) FROM ranges GROUP BY name")
    iket_cli.report.write("iket-affine", "report.html")

Attributes are imported on first use, so ``import iket_cli`` stays cheap. The package is
laid out by stage, each importing only from those below it (README.md, "How the code is laid
out"; ``tests/test_layout.py`` checks it): ``errors`` ← ``model`` ← ``system`` ← {``capture``,
``decode``, ``analysis``} ← ``render`` ← ``pipeline`` ← {``cli``, ``hosts``}.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

#: The public API: name -> (module, attribute; None for the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    "profile": ("pipeline.profile", "profile"),
    "window": ("pipeline.window", "window"),
    "prepare": ("capture.in_process.live", "prepare"),
    "Capture": ("pipeline.capture", "Capture"),
    "Process": ("model.folder", "Process"),
    "Target": ("capture.targets", "Target"),
    "IketError": ("errors", "IketError"),
    "ExitCode": ("errors", "ExitCode"),
    "report": ("render.report", None),
}

__all__ = ["__version__", *_LAZY]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext iket_cli``: the ``%%iket`` cell magic and ``%iket`` (docs/notebooks.md)."""
    from .hosts import ipython as host

    host.load(ipython)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'iket_cli' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    loaded = importlib.import_module(f".{module}", __name__)
    value = loaded if attr is None else getattr(loaded, attr)
    globals()[name] = value
    return value
