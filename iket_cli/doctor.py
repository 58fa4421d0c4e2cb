"""``iket doctor``: can this machine capture, and if not, what is missing.

Every check looks without importing anything heavy: packages are found with
``importlib.util.find_spec`` (which runs no package code), GPUs with ``nvidia-smi``.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from dataclasses import dataclass

from . import sysinfo, toolchain
from ._version import __version__
from .errors import IketError


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def checks() -> list[Check]:
    found: list[Check] = [Check("iket-cli", True, f"{__version__} on Python {platform.python_version()}")]
    try:
        tool = toolchain.find()
        found.append(Check("run-iket", True, f"{tool.version or 'unknown version'} at {tool.path}"))
        decoder = bool(tool.dsl_packages) and os.path.isdir(os.path.join(tool.dsl_packages or "", "iket"))
        found.append(
            Check(
                "IKET decoder",
                decoder,
                tool.dsl_packages or "not found",
                "pip install -U nvidia-cutlass-dsl-libs-base",
            )
        )
    except IketError as error:
        found.append(Check("run-iket", False, error.message, error.hint or ""))
    gpus = sysinfo.query_gpus()
    found.append(
        Check(
            "GPU",
            bool(gpus),
            "; ".join(f"{g['index']}: {g['name']} (driver {g['driver']})" for g in gpus)
            or "nvidia-smi found no GPU",
            "captures need an NVIDIA GPU and its driver; iket postprocess, show and diff work without one",
        )
    )
    injection = os.environ.get("CUDA_INJECTION64_PATH")
    found.append(
        Check(
            "CUDA_INJECTION64_PATH",
            not injection,
            injection or "unset",
            "unset it: IKET cannot run under Nsight or another CUPTI tool",
        )
    )
    for package, why in (("torch", "GPU workloads"), ("tvm_tirx", "TIRx kernels"), ("cuda", "cuda-python")):
        present = importlib.util.find_spec(package) is not None
        found.append(
            Check(
                package,
                present,
                "installed" if present else "not installed",
                f"pip install 'iket-cli[gpu]' for {why}",
                required=False,
            )
        )
    return found


def healthy(results: list[Check]) -> bool:
    return all(c.ok for c in results if c.required)
