"""``iket doctor``: can this machine capture, and if not, what is missing.

The CLI's own process imports nothing heavy: everything that needs the GPU stack (the
IKET decoder, cuda-python's driver and NVRTC bindings, TIRx) is probed in child
processes started together, so a crash or a slow import in one cannot take the others
down and the whole check takes as long as the slowest probe (TIRx's import, seconds).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..errors import IketError
from ..model import runiket_facts
from ..system import machine, slurm_cli, spawn, toolchain
from .two_pass import trackers

MIN_COMPUTE_CAPABILITY = (9, 0)
PROBE_TIMEOUT_S = 120
GPU_EXTRA = "pip install 'iket-cli[gpu]'"
# Variables that change what CuTe DSL compiles; run-iket appends "iket" to the first two.
CUTE_VARIABLES = (
    "CUTE_DSL_COMPILER_OPT",
    "CUTE_EXPERIMENTAL_DSL_COMPILER_OPT",
    "CUTE_DSL_NO_CACHE",
    "CUTE_DSL_DISABLE_FILE_CACHING",
    "CUTE_DSL_ARCH",
)

# Each probe prints one JSON line on success; anything else (an exception) is its failure.
_DECODER_PROBE = """
import json, iket.cli.main
from iket import RawCaptureDecoder
print(json.dumps({"module": iket.__file__}))
"""
_NVRTC_PROBE = """
import json
from cuda.bindings import nvrtc
err, major, minor = nvrtc.nvrtcVersion()
assert int(err) == 0, err
print(json.dumps({"version": f"{major}.{minor}"}))
"""
_GPU_PROBE = """
import json
from cuda.bindings import driver as d
def ok(result):
    if int(result[0]) != 0:
        raise SystemExit(f"CUDA driver call failed: {result[0]!r}")
    return result[1] if len(result) == 2 else result[1:]
ok(d.cuInit(0) + (None,))
version = ok(d.cuDriverGetVersion())
attr = d.CUdevice_attribute
gpus = []
for i in range(ok(d.cuDeviceGetCount())):
    dev = ok(d.cuDeviceGet(i))
    name = ok(d.cuDeviceGetName(128, dev)).split(b"\\0")[0].decode()
    major = ok(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = ok(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    gpus.append({"index": i, "name": name, "cc": [major, minor]})
print(json.dumps({"cuda_driver": f"{version // 1000}.{version % 1000 // 10}", "gpus": gpus}))
"""
# CuTe DSL needs a CUDA-toolkit flavour package beside libs-base/libs-core, or `import
# cutlass` fails with "No CTK flavor installed".
_CUTE_PROBE = """
import json, time, importlib.metadata as m
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
flavours = [f for f in ("cu13", "cu12") if version(f"nvidia-cutlass-dsl-libs-{f}")]
start = time.perf_counter()
import cutlass, cutlass.cute
from cutlass.cute.experimental import iket
print(json.dumps({"version": version("nvidia-cutlass-dsl-libs-core") or version("nvidia-cutlass-dsl"),
                  "flavours": flavours, "seconds": round(time.perf_counter() - start, 2)}))
"""
_TIRX_PROBE = """
import json, time
start = time.perf_counter()
import tvm_tirx
print(json.dumps({"seconds": round(time.perf_counter() - start, 2),
                  "version": getattr(tvm_tirx, "__version__", "unknown")}))
"""

# The in-process session (iket_cli.window, %%iket, pytest's mark, --window, --one-pass): NVIDIA's
# library found and loaded as a window loads it (it needs the driver), its ABI read.
_SESSION_PROBE = """
import json
from iket_cli.capture.in_process import session
from iket_cli.errors import IketError
try:
    path = session.find_library(dsl_packages=DSL_PACKAGES)
    major, minor, _ = session.abi_version(session.load(path), path)
except IketError as error:
    raise SystemExit(error.message)
print(json.dumps({"path": str(path), "abi": f"{major}.{minor}"}))
"""


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


class Probe:
    """A snippet of Python run in a child process, started now and read later."""

    def __init__(self, code: str, env: dict[str, str]) -> None:
        self.proc: Any = None
        try:
            self.proc = spawn.start(
                [sys.executable, "-c", code], env=env, stdout=spawn.PIPE, stderr=spawn.PIPE, text=True,
                new_session=True,
            )  # fmt: skip
        except IketError as error:
            self.error = error.message

    def result(self) -> tuple[dict[str, Any] | None, str]:
        """(the probe's JSON answer, "") or (None, the last line of what went wrong)."""
        if self.proc is None:
            return None, self.error
        try:
            out, err = spawn.output(self.proc, PROBE_TIMEOUT_S)
        except spawn.TimeoutExpired:  # its group killed, the wait bounded: a daemon may hold the pipes
            spawn.kill_group(self.proc)
            return None, f"no answer within {PROBE_TIMEOUT_S} s"
        lines = out.strip().splitlines()
        if self.proc.returncode == 0 and lines:
            try:
                return json.loads(lines[-1]), ""
            except ValueError:
                pass
        problem = [line for line in err.strip().splitlines() if line.strip()]
        return None, (problem[-1].strip() if problem else f"exit status {self.proc.returncode}")


def checks(env: dict[str, str] | None = None) -> list[Check]:
    """Every check, in the order they are shown."""
    env = dict(os.environ if env is None else env)
    found = [Check("Python", True, f"{platform.python_version()} at {sys.executable}")]
    found.append(Check("iket-cli", True, __version__))
    try:
        tool: toolchain.RunIket | None = toolchain.find(None, env)
    except IketError as error:
        tool = None
        found.append(Check("run-iket", False, error.message, error.hint or ""))
    child_env = tool.child_env(env) if tool else env
    probes = {
        "nvrtc": Probe(_NVRTC_PROBE, env),
        "gpu": Probe(_GPU_PROBE, env),
        "tirx": Probe(_TIRX_PROBE, child_env),
        "cute": Probe(_CUTE_PROBE, child_env),
        "session": Probe(
            _SESSION_PROBE.replace("DSL_PACKAGES", repr(tool.dsl_packages if tool else None)), env
        ),
    }
    if tool:
        probes["decoder"] = Probe(_DECODER_PROBE, child_env)
    smi = machine.GpuQuery()
    if tool:
        found.append(Check("run-iket", True, f"{tool.version or 'unknown version'} at {tool.path}"))
        found.append(_decoder(tool, *probes["decoder"].result()))
    found.append(_nvrtc(*probes["nvrtc"].result()))
    found.append(_gpu(*probes["gpu"].result(), smi.result()))
    found.append(_injection(env))
    found.append(_session(*probes["session"].result()))
    found.append(_tirx(*probes["tirx"].result()))
    found.append(_cute(*probes["cute"].result()))
    found.append(_cute_variables(env))
    found.append(_tracker_cache(env))
    found.append(_sql())
    found.append(_slurm(env))
    return found


def _decoder(tool: toolchain.RunIket, answer: dict | None, problem: str) -> Check:
    where = f"from {tool.dsl_packages}" if tool.dsl_packages else "from the interpreter's own path"
    if answer:
        return Check("IKET decoder", True, f"iket and RawCaptureDecoder import {where}")
    return Check(
        "IKET decoder",
        False,
        f"import iket failed {where}: {problem}",
        f"pip install -U '{runiket_facts.INSTALL}' into this Python",
    )


def _nvrtc(answer: dict | None, problem: str) -> Check:
    if answer:
        return Check("cuda-bindings + NVRTC", True, f"NVRTC {answer['version']}")
    fix = f"{GPU_EXTRA} (cuda-python): the kernels are compiled through it"
    if "nvrtc" in problem.lower():
        fix = (
            "install NVRTC for the driver's CUDA version (pip install nvidia-cuda-nvrtc-cu12, "
            "or the CUDA toolkit's lib64 on LD_LIBRARY_PATH)"
        )
    return Check("cuda-bindings + NVRTC", False, problem, fix)


def _gpu(answer: dict | None, problem: str, smi: list[dict[str, str]]) -> Check:
    """A GPU of compute capability 9.0 or newer; cuda-python's answer, else nvidia-smi's."""
    fix = "captures need an NVIDIA GPU of compute capability 9.0 or newer (Hopper) and its driver; "
    fix += "iket postprocess, show, diff and report work without one"
    driver = smi[0]["driver"] if smi else None
    if answer:
        gpus = answer["gpus"]
        shown = "; ".join(f"{g['index']}: {g['name']} (sm_{g['cc'][0]}{g['cc'][1]})" for g in gpus)
        detail = f"{shown or 'none'}; driver {driver or '?'} (CUDA {answer['cuda_driver']})"
        capable = [g for g in gpus if tuple(g["cc"]) >= MIN_COMPUTE_CAPABILITY]
        return Check("GPU", bool(capable), detail, fix)
    if smi:  # no cuda-python: nvidia-smi still names the GPUs, not their capability
        shown = "; ".join(f"{g['index']}: {g['name']}" for g in smi)
        return Check("GPU", True, f"{shown}; driver {driver} (compute capability unknown: {problem})")
    return Check("GPU", False, f"no GPU found ({problem})", fix)


def _injection(env: dict[str, str]) -> Check:
    injection = env.get("CUDA_INJECTION64_PATH")
    return Check(
        "CUDA_INJECTION64_PATH",
        not injection,
        injection or "unset",
        "unset it: IKET cannot run under Nsight or another CUPTI tool",
    )


def _session(answer: dict | None, problem: str) -> Check:
    name = "in-process session"
    facts = runiket_facts.installed()
    if answer:
        detail = (
            f"ABI {answer['abi']} at {answer['path']}: iket_cli.window, %%iket, pytest --iket, --window, "
            f"--one-pass (run-iket {facts.release}: at most {facts.safe_max_ts} timestamps a warp, "
            f"{_windows(facts)})"
        )
        return Check(name, True, detail, required=False)
    fix = (
        f"windows need run-iket's libiket_injection.so ({runiket_facts.MINIMUM_TEXT} or newer) and "
        "the NVIDIA driver; "
        "the two-pass capture does not use it"
    )
    return Check(name, False, problem, fix, required=False)


def _windows(facts: runiket_facts.SessionFacts) -> str:
    """How many windows one process may open, as the facts say."""
    if facts.windows_per_process is None:
        return "any number of windows a process"
    n = facts.windows_per_process
    return f"{n} window a process; pytest --iket runs each other window in a process of its own"


def _tirx(answer: dict | None, problem: str) -> Check:
    if answer:
        detail = f"tvm_tirx {answer['version']} imports in {answer['seconds']} s (once per pass)"
        return Check("TIRx", True, detail, required=False)
    return Check("TIRx", False, problem, f"{GPU_EXTRA} for TIRx kernels", required=False)


def _cute(answer: dict | None, problem: str) -> Check:
    """CuTe DSL, the other IKET front end: importable, with a CUDA-toolkit flavour."""
    if answer:
        flavours = ", ".join(answer["flavours"]) or "none found by name"
        detail = (
            f"CuTe DSL {answer['version']} (CTK flavour: {flavours}) and its iket ops import "
            f"in {answer['seconds']} s"
        )
        return Check("CuTe DSL", True, detail, required=False)
    fix = (
        "pip install nvidia-cutlass-dsl nvidia-cutlass-dsl-libs-cu13 (cu12 for a CUDA 12 driver) "
        "for CuTe DSL kernels"
    )
    return Check("CuTe DSL", False, problem, fix, required=False)


def _cute_variables(env: dict[str, str]) -> Check:
    shown = [f"{name}={env[name]}" for name in CUTE_VARIABLES if name in env]
    detail = ", ".join(shown) or "none set"
    if "CUTE_DSL_NO_CACHE" not in env:
        detail += "; iket profile sets CUTE_DSL_NO_CACHE=1 in both passes (--keep-dsl-cache leaves it)"
    return Check("CuTe DSL variables", True, detail, required=False)


def _tracker_cache(env: dict[str, str]) -> Check:
    """Where reused tracker passes live, and how much they hold (never a failure)."""
    root = trackers.cache_root(env)
    entries = [e for e in root.iterdir() if e.is_dir()] if root.is_dir() else []
    size = sum(f.stat().st_size for e in entries for f in e.rglob("*") if f.is_file())
    detail = f"{root}: {len(entries)} tracker pass(es), {size / 1e6:.1f} MB (--tracker fresh skips it)"
    return Check("tracker cache", True, detail, required=False)


def _sql() -> Check:
    """Whether iket export and iket sql can run here (the optional ``sql`` extra), from the
    installed distributions' metadata: nothing is imported."""
    from importlib import metadata

    found, missing = [], []
    for name in ("pyarrow", "duckdb"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        return Check(
            "iket sql / export", False, f"{', '.join(missing)} not installed", SQL_FIX, required=False
        )
    return Check("iket sql / export", True, ", ".join(found), required=False)


def _slurm(env: dict[str, str]) -> Check:
    """Whether ``iket run --executor slurm`` can submit from here: the tools, and sinfo's answer."""
    answers, detail = slurm_cli.cluster_answer(env)
    fix = "" if answers else "run iket on a login node of a Slurm cluster for iket run --executor slurm"
    return Check("Slurm (iket run --executor slurm)", answers, detail, fix, required=False)


#: What makes iket export and iket sql work.
SQL_FIX = "pip install 'iket-cli[sql]' for iket export and iket sql"


def gpu_table(*, refresh: bool = False, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``--gpu``: the probe table of this stack (capture/probes.py), cached unless ``refresh``.

    Raises a one-line error where there is nothing to probe with (no run-iket, no GPU)."""
    from . import probes

    env = dict(os.environ if env is None else env)
    tool = toolchain.find(None, env)
    gpus = machine.query_gpus()
    if not gpus:
        raise IketError(
            "iket doctor --gpu needs an NVIDIA GPU: nvidia-smi found none", hint="run it on the GPU machine"
        )
    of = probes.stack(tool.version, gpus)
    table = None if refresh else probes.cached(env, of)
    if table is not None:
        return {**table, "cached": True}
    return {**probes.store(env, of, probes.run_all(tool, env, sys.executable)), "cached": False}


def healthy(results: list[Check]) -> bool:
    return all(c.ok for c in results if c.required)
