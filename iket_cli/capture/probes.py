"""``iket doctor --gpu``: which workloads the installed run-iket survives on this GPU.

run-iket kills a process that runs a half-precision cuBLAS GEMM (docs/faults.md),
and nothing in its output says so. Each probe here is a tiny workload — an elementwise
kernel, GEMMs in fp32, bf16 and fp16, attention, and an instrumented TIRx and CuTe DSL
kernel where those are installed — run under the installed run-iket (its two passes, raw
output only) in its own process tree with a timeout. A probe *survives* when it printed its
last line and no pass died by a signal. The table is cached per stack (run-iket, driver,
torch and its CUDA), so the diagnosis of a crashed capture can quote it without a GPU run.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..model import atomic, jsonio
from ..system import spawn, toolchain, tree
from ..system.tree import kill_tree
from .two_pass import trackers

PROBE_TIMEOUT_S = 240
#: Probes at once: each holds a small part of the GPU for seconds.
PARALLEL = 4
DONE = "iket-probe: done"
SURVIVES, KILLED, FAILED, TIMEOUT, SKIPPED = "survives", "killed", "failed", "timeout", "skipped"
_TORCH = "import torch\nx = torch.randn(512, 512, device='cuda'{dtype})\n"
_CUTE = """
import cutlass, cutlass.cute as cute, torch
from cutlass.cute.runtime import from_dlpack
@cute.kernel
def k(gX: cute.Tensor):
    i, _, _ = cute.arch.thread_idx()
    cute.experimental.iket.range_push("probe")
    gX[i] = gX[i] + cutlass.Float32(1.0)
    cute.experimental.iket.range_pop()
@cute.jit
def launch(mX: cute.Tensor):
    k(mX).launch(grid=(1, 1, 1), block=(32, 1, 1))
x = torch.zeros(32, device="cuda")
cute.compile(launch, from_dlpack(x))(from_dlpack(x))
"""
_TIRX = """
import torch
from tvm_tirx.backend.cuda.iket import IketProfiler
from tvm_tirx.script import tirx as T
@T.function
def k(A: T.Tensor((32,), T.float32)):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32)):
        profiler = IketProfiler()
        profiler.range_push("probe")
        A[T.cuda.thread_idx("x")] = T.float32(1)
        profiler.range_pop()
x = torch.zeros(32, device="cuda")
IketProfiler().compile(k, target="cuda")(x)
"""
#: name -> (the package it needs, its code). The last line printed is DONE.
PROBES: dict[str, tuple[str, str]] = {
    "elementwise": ("torch", _TORCH.format(dtype="") + "y = x * 2 + 1\n"),
    "fp32 GEMM": ("torch", _TORCH.format(dtype="") + "y = x @ x\n"),
    "bf16 GEMM": ("torch", _TORCH.format(dtype=", dtype=torch.bfloat16") + "y = x @ x\n"),
    "fp16 GEMM": ("torch", _TORCH.format(dtype=", dtype=torch.float16") + "y = x @ x\n"),
    "bf16 SDPA": (
        "torch",
        "import torch\nq = torch.randn(2, 4, 128, 64, device='cuda', dtype=torch.bfloat16)\n"
        "y = torch.nn.functional.scaled_dot_product_attention(q, q, q)\n",
    ),
    "TIRx kernel": ("tvm_tirx", _TIRX),
    "CuTe DSL kernel": ("cutlass", _CUTE),
}
#: Every probe ends so: its kernels finished (synchronised), then the line that says it survived.
_END = (
    "import sys\nif 'torch' in sys.modules:\n    sys.modules['torch'].cuda.synchronize()\n"
    f"print({DONE!r}, flush=True)\n"
)
_ABNORMAL = re.compile(r"exits abnormally with return code: (-?\d+)")


@dataclass(frozen=True)
class Verdict:
    """One probe's outcome."""

    name: str
    verdict: str  # SURVIVES, KILLED, FAILED, TIMEOUT or SKIPPED
    detail: str
    seconds: float


def stack(run_iket_version: str | None, gpus: list[dict[str, str]]) -> dict[str, Any]:
    """What a probe table holds for: run-iket, the GPU models and driver, torch (its version
    names its CUDA) and the kernel DSLs: an H200's table is not an H100's."""
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    driver = sorted({g.get("driver") for g in gpus if g.get("driver")})
    models = sorted({g.get("name") for g in gpus if g.get("name")})
    dsls = {name: version(name) for name in ("apache-tvm-tirx", "nvidia-cutlass-dsl")}
    return {
        "run_iket": run_iket_version,
        "driver": driver,
        "gpus": models,
        "torch": version("torch"),
        "dsl": dsls,
    }


def cache_file(env: dict[str, str], of: dict[str, Any]) -> Path:
    return trackers.cache_root(env) / "gpu-probes" / f"{trackers.key(of)}.json"


#: Verdicts about the stack itself: a table of only these is cached (a probe that failed or
#: timed out may have met this machine's passing trouble, and is probed again next time).
LASTING = (SURVIVES, KILLED, SKIPPED)


def cached(env: dict[str, str], of: dict[str, Any]) -> dict[str, Any] | None:
    """The cached probe table of this stack, if there is one of the table's shape."""
    try:
        table = jsonio.read(cache_file(env, of))
    except (OSError, ValueError):
        return None
    return table if _is_table(table, of) else None


def _is_table(table: Any, of: dict[str, Any]) -> bool:
    if not isinstance(table, dict) or table.get("stack") != of or not jsonio.is_text(table.get("probed_at")):
        return False
    found = table.get("probes")
    return isinstance(found, list) and all(
        isinstance(p, dict)
        and jsonio.is_text(p.get("name"))
        and p.get("verdict") in (*LASTING, FAILED, TIMEOUT)
        and jsonio.is_text(p.get("detail"))
        and isinstance(p.get("seconds"), (int, float))
        and not isinstance(p.get("seconds"), bool)
        for p in found
    )


def run_all(tool: toolchain.RunIket, env: dict[str, str], python: str) -> list[Verdict]:
    """Every probe, :data:`PARALLEL` at a time, each under run-iket in a process tree of its own.

    The probes carry a marker and a watchdog guards them: Ctrl-C, SIGTERM or SIGHUP stops every
    probe tree and removes the scratch folder (exit 130, 143, 129); ``kill -9`` of the CLI leaves
    the watchdog to do the same."""
    from importlib.util import find_spec

    from ..errors import CaptureInterrupted, Terminated, signal_of
    from ..system import signals
    from .watchdog import Watchdog

    token = uuid.uuid4().hex
    marked = {**env, tree.MARK_ENV: token}
    scratch = Path(tempfile.mkdtemp(prefix="iket-probes-"))
    try:
        with Watchdog(None, token=token, remove=[scratch]), signals.as_exception():
            jobs = {}
            with ThreadPoolExecutor(PARALLEL) as pool:
                try:
                    for number, (name, (package, code)) in enumerate(PROBES.items()):
                        if find_spec(package) is None:
                            continue
                        folder = scratch / str(number)
                        jobs[name] = pool.submit(_probe, name, code, tool, marked, python, folder)
                    wait(list(jobs.values()))
                except (KeyboardInterrupt, Terminated) as stopped:
                    for job in jobs.values():
                        job.cancel()
                    tree.kill_marked(token)
                    raise CaptureInterrupted.by(
                        signal_of(stopped), " while probing the GPU; every probe was stopped", phase="probe"
                    ) from None
            found = {name: job.result() for name, job in jobs.items()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [
        found.get(name, Verdict(name, SKIPPED, f"{package} is not installed", 0.0))
        for name, (package, _) in PROBES.items()
    ]


def store(env: dict[str, str], of: dict[str, Any], verdicts: list[Verdict]) -> dict[str, Any]:
    """Cache the table for this stack; what was cached."""
    table = {
        "stack": of,
        "probed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "probes": [asdict(v) for v in verdicts],
    }
    if any(v.verdict not in LASTING for v in verdicts):
        return table  # shown, not cached: the next run probes again
    path = cache_file(env, of)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(path, json.dumps(table, indent=1))
    except OSError:
        pass  # the table is still shown; the next run probes again
    return table


def summary(table: dict[str, Any]) -> str:
    """One line: what the installed run-iket killed and what it survived, and when."""
    probes = table.get("probes") or []
    killed = [p["name"] for p in probes if p.get("verdict") in (KILLED, FAILED, TIMEOUT)]
    survived = [p["name"] for p in probes if p.get("verdict") == SURVIVES]
    said = f"killed or failed: {', '.join(killed) or 'none'}; survived: {', '.join(survived) or 'none'}"
    return f"iket doctor --gpu ({table.get('probed_at', '?')}, this stack): {said}"


def _probe(name: str, code: str, tool: toolchain.RunIket, env: dict[str, str], python: str, folder: Path):
    folder.mkdir(parents=True)
    script = folder / "probe.py"
    script.write_text(code + _END)
    argv = [tool.path, "--output-dir", str(folder / "out"), "profile", "--postprocess", "none", "--",
            python, str(script)]  # fmt: skip
    start = time.monotonic()
    proc = spawn.start(argv, env=tool.child_env(env), cwd=folder, stdout=spawn.PIPE, stderr=spawn.STDOUT,
                       new_session=True, text=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except spawn.TimeoutExpired:
        kill_tree(proc)
        proc.communicate()
        return Verdict(
            name, TIMEOUT, f"no end within {PROBE_TIMEOUT_S} s", round(time.monotonic() - start, 1)
        )
    seconds = round(time.monotonic() - start, 1)
    return _verdict(name, out or "", seconds)


def _verdict(name: str, out: str, seconds: float) -> Verdict:
    """A probe's verdict from run-iket's output (both passes' lines and the workload's)."""
    crashed = _ABNORMAL.search(out)
    if crashed and int(crashed.group(1)) < 0:
        from .runiket import status_text

        return Verdict(name, KILLED, f"the workload died, status {status_text(crashed.group(1))}", seconds)
    if DONE in out:
        return Verdict(name, SURVIVES, "ran to its end under run-iket", seconds)
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    own = [line for line in lines if not line.startswith("[run-iket]")]  # the workload's error first
    said = (own or lines or ["no output"])[-1]
    return Verdict(name, FAILED, said[:200], seconds)
