"""Bisect run-iket's in-process session (C ABI 1.0) over every knob its header offers.

    python3 scripts/gpu_session_bisect.py OUT [--group windows|budget|probe|all] [--repeats N]
        [--budget-repeats N] [--jobs J] [--only PART,...] [--skip PART,...] [--deadline S]

Each case runs in a process of its own (``--child CASE``: the library loaded by ctypes as a
window loads it, no run-iket, no iket window code), so a crash ends that case alone. Every C
call's result is printed; after each window the saved trace is counted (launches, ranges,
marks). One JSON line per run goes to stdout and OUT/results.jsonl, the run's whole console to
OUT/logs/CASE-rN.log; a table of lived/died per case ends the run.

Groups:
- ``windows``: WINDOWS windows in one process (default 12), each around a launch of a TIRx kernel,
  with a bf16 GEMM, a new kernel and heap churn between windows. ``lifecycle``: ``fresh`` a new
  session per window (Create .. Destroy: the design of iket 0.1), ``reuse`` one handle for the
  process (Start, Stop, SaveTrace, ClearTraceData per window, Destroy at exit), ``reuse-keep`` the
  same without ClearTraceData, ``leak`` a new session per window, none destroyed until exit.
  ``load``: where each window's kernel module is loaded: ``before`` (all before window 1),
  ``between`` (a new module compiled and run between windows, outside any session), ``inside`` (a
  new module compiled inside its window). ``perturb``: glibc's MALLOC_PERTURB_ set, so memory the
  library frees is overwritten and a later read of it fails at once, not by chance. ``defer``:
  DEFER_TRACE_READBACK; ``eager``: CUDA_MODULE_LOADING=EAGER (every function loaded with its module).
- ``budget``: one window of one kernel (``seed``: 3 timestamps a warp; ``big``: big_kernel.py
  at ITERS=512, 3 launches, 1,538 a warp, 4.9M events) at max_ts_per_warp 256 .. 2048, with the
  default 512 MiB device buffer, the buffer run-iket's tracker pass would size (``scaled``), a
  4 GiB one (``large``), and DEFER_TRACE_READBACK (run-iket's own default) with each.
- ``probe``: what the state machine answers (SaveTrace while running, ClearTraceData while
  running, Start twice, SetOptions between windows of one handle).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
BIG = {"GRID": 132, "BLOCK": 384, "ITERS": 512, "LAUNCHES": 3}
#: In the order they run: the 4.9M-event kernel's need first, the default (256) as the control last.
BUDGETS = (2048, 512, 257, 1024, 384, 256)
DEFER = 2


def window_cases(windows: int) -> dict[str, dict]:
    cases = {}
    for lifecycle in ("fresh", "reuse", "reuse-keep", "leak"):
        for load in ("before", "between", "inside"):
            for perturb in (False, True):
                name = f"w-{lifecycle}-{load}{'-perturb' if perturb else ''}"
                cases[name] = {"group": "windows", "lifecycle": lifecycle, "load": load,
                               "perturb": perturb, "windows": windows}  # fmt: skip
    for lifecycle in ("fresh", "reuse"):  # run-iket's own readback policy; every function loaded at once
        cases[f"w-{lifecycle}-inside-perturb-defer"] = {"group": "windows", "lifecycle": lifecycle,
                                                        "load": "inside", "perturb": True,
                                                        "windows": windows, "flags": DEFER}  # fmt: skip
        cases[f"w-{lifecycle}-inside-perturb-eager"] = {"group": "windows", "lifecycle": lifecycle,
                                                        "load": "inside", "perturb": True, "windows": windows,
                                                        "env": {"CUDA_MODULE_LOADING": "EAGER"}}  # fmt: skip
    return cases


def budget_cases() -> dict[str, dict]:
    cases = {}
    for kernel in ("big", "seed"):
        for budget in BUDGETS:
            for buffer in ("default", "scaled", "large"):
                for defer in (False, True):
                    name = f"b-{kernel}-{budget}-{buffer}{'-defer' if defer else ''}"
                    cases[name] = {"group": "budget", "kernel": kernel, "budget": budget, "buffer": buffer,
                                   "flags": DEFER if defer else 0}  # fmt: skip
    return cases


def probe_cases() -> dict[str, dict]:
    return {"p-states": {"group": "probe"}}


# --- the child: one case in this process -------------------------------------------------------


class Lib:
    """The session library's calls, each printed with its result."""

    def __init__(self, name: str) -> None:
        sys.path[:0] = [str(HERE)]
        from iket_cli.capture.in_process import session as S

        self.S = S
        self.lib = S.load(S.find_library(None))
        self.name = name
        self.results: list[str] = []

    def call(self, what: str, *args) -> int:
        result = getattr(self.lib, f"IketProfilingSession{what}")(*args)
        self.results.append(f"{what}={result}")
        print(f"@@ {self.name}: {what} -> {result}", flush=True)
        return result

    def create(self, budget: int | None = None, buffer: int | None = None, flags: int = 0):
        handle = ctypes.c_void_p()
        self.call("Create", ctypes.pointer(handle))
        self.set_options(handle, budget, buffer, flags)
        return handle

    def set_options(self, handle, budget=None, buffer=None, flags=0) -> int:
        options = self.S.Options()
        options.struct_size = ctypes.sizeof(self.S.Options)
        self.call("OptionsInit", ctypes.pointer(options))
        if budget is not None:
            options.max_ts_per_warp = budget
        if buffer is not None:
            options.device_buffer_size = buffer
        options.flags |= flags
        options.log_level = 2
        return self.call("SetOptions", handle, ctypes.pointer(options))


def count(path: Path) -> dict:
    """Launches, ranges and marks in a saved trace, by a byte scan (a 900 MB trace is not parsed)."""
    if not path.is_file():
        return {"saved": False}
    keys = {"launches": b'"kernelName"', "ranges": b'"rangeId"', "marks": b'"markerNameIdx"'}
    found = dict.fromkeys(keys, 0)
    tail = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 24):
            block = tail + chunk
            for key, needle in keys.items():
                found[key] += block.count(needle)
            tail = block[-32:]
            for key, needle in keys.items():  # a needle across the seam is counted once, next time
                found[key] -= tail.count(needle)
    for key, needle in keys.items():
        found[key] += tail.count(needle)
    found["bytes"] = path.stat().st_size
    return found


def kernel_module(folder: Path, number: int):
    """A TIRx kernel of its own (its own CUDA module once compiled): affine with scale ``number``."""
    source = f"""
from tvm_tirx.backend.cuda.iket import IketProfiler
from tvm_tirx.script import tirx as T

@T.function
def affine_{number}(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32)):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32)):
        profiler = IketProfiler()
        tid = T.cuda.thread_idx("x")
        profiler.range_push("affine")
        value = A[tid]
        profiler.mark("loaded")
        B[tid] = T.float32({number}) * value + T.float32(1)
        profiler.range_pop()

def compiled():
    return IketProfiler().compile(affine_{number}, target="cuda")
"""
    path = folder / f"bisect_kernel_{number}.py"
    path.write_text(source)
    sys.path.insert(0, str(folder))
    import importlib

    return importlib.import_module(path.stem).compiled()


def churn(trace: Path) -> None:
    """Host work between windows: the heap of a trace read and written again, and many blocks
    of many sizes allocated and freed (what a window's finish does to the heap)."""
    import random

    if trace.is_file() and trace.stat().st_size < (64 << 20):
        data = json.loads(trace.read_text())
        json.dumps(data)
    rng = random.Random(len(str(trace)))
    held = [bytearray(rng.randrange(16, 8192)) for _ in range(40000)]
    del held[::2]
    held.extend(os.urandom(rng.randrange(16, 4096)) for _ in range(20000))
    del held


def child_windows(case: dict, out: Path, name: str) -> None:
    import iket_cli

    iket_cli.prepare()
    import torch

    lib = Lib(name)
    folder = Path(tempfile.mkdtemp(prefix="bisect-kernels-"))
    n = case["windows"]
    a = torch.arange(32, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    g = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
    kernels = {}
    if case["load"] == "before":
        kernels = {i: kernel_module(folder, i) for i in range(1, n + 1)}
        for kernel in kernels.values():
            kernel(a, b)
        torch.cuda.synchronize()
    handle = lib.create(flags=case.get("flags", 0)) if case["lifecycle"].startswith("reuse") else None
    handles = []
    free0 = torch.cuda.mem_get_info()[0]
    for i in range(1, n + 1):
        if case["load"] == "between":
            kernels[i] = kernel_module(folder, i)
            kernels[i](a, b)
            torch.cuda.synchronize()
        if not case["lifecycle"].startswith("reuse"):
            handle = lib.create(flags=case.get("flags", 0))
            handles.append(handle)
        lib.call("Start", handle)
        if case["load"] == "inside":
            kernels[i] = kernel_module(folder, i)
        kernels[i](a, b)
        torch.cuda.synchronize()
        lib.call("Stop", handle)
        trace = out / f"{name}-w{i}.json"
        lib.call("SaveTrace", handle, str(trace).encode())
        torch.testing.assert_close(b, i * a + 1)
        counted = count(trace)
        print(f"@@ {name}: window {i} " + json.dumps(counted), flush=True)
        if case["lifecycle"] == "reuse":
            lib.call("ClearTraceData", handle)
        elif case["lifecycle"] == "fresh":
            lib.call("Destroy", handle)
        # between windows: a bf16 GEMM (cuBLAS loads its modules outside any session), host work
        (g @ g).float().sum().item()
        churn(trace)
        trace.unlink(missing_ok=True)
    free1 = torch.cuda.mem_get_info()[0]
    print(f"@@ {name}: device memory taken over the windows {(free0 - free1) >> 20} MiB", flush=True)
    if case["lifecycle"].startswith("reuse"):
        lib.call("Destroy", handle)
    for h in handles if case["lifecycle"] == "leak" else []:
        lib.call("Destroy", h)
    print(f"@@ {name}: done", flush=True)


def scaled_buffer(kernel: str, budget: int) -> int:
    """What run-iket's tracker pass sizes: every launch's warps times the warp's bytes
    (8 a timestamp; the recipe's few header bytes rounded up to 64), plus 15%."""
    big = kernel == "big"
    ctas, warps, launches = (BIG["GRID"], BIG["BLOCK"] // 32, BIG["LAUNCHES"]) if big else (1, 1, 1)
    return int(launches * ctas * warps * (budget * 8 + 64) * 1.15)


def child_budget(case: dict, out: Path, name: str) -> None:
    import iket_cli

    iket_cli.prepare()
    import torch

    lib = Lib(name)
    scaled = scaled_buffer(case["kernel"], case["budget"])
    buffer = {"default": None, "large": 4 << 30, "scaled": scaled}[case["buffer"]]
    print(f"@@ {name}: buffer {buffer}", flush=True)
    if case["kernel"] == "big":
        os.environ.update({k: str(v) for k, v in BIG.items()})
        sys.path.insert(0, str(HERE / "tests" / "fixtures" / "workloads"))
        import big_kernel as module
    else:
        sys.path.insert(0, str(HERE / "examples"))
        import profile_affine as module
    torch.zeros(1, device="cuda")
    handle = lib.create(case["budget"], buffer, case["flags"])
    start = time.monotonic()
    lib.call("Start", handle)
    module.workload()
    torch.cuda.synchronize()
    lib.call("Stop", handle)
    trace = out / f"{name}.json"
    lib.call("SaveTrace", handle, str(trace).encode())
    lib.call("Destroy", handle)
    print(f"@@ {name}: window_s {time.monotonic() - start:.2f} " + json.dumps(count(trace)), flush=True)
    trace.unlink(missing_ok=True)
    print(f"@@ {name}: done", flush=True)


def child_probe(case: dict, out: Path, name: str) -> None:
    import iket_cli

    iket_cli.prepare()
    import torch

    sys.path.insert(0, str(HERE / "examples"))
    import profile_affine

    lib = Lib(name)
    torch.zeros(1, device="cuda")
    handle = lib.create(64)
    lib.call("Start", handle)
    lib.call("Start", handle)  # twice
    profile_affine.workload()
    lib.call("SaveTrace", handle, str(out / f"{name}-running.json").encode())  # while running
    lib.call("ClearTraceData", handle)  # while running
    lib.call("Stop", handle)
    lib.call("Stop", handle)  # twice
    lib.call("SaveTrace", handle, str(out / f"{name}-1.json").encode())
    print(f"@@ {name}: window 1 " + json.dumps(count(out / f"{name}-1.json")), flush=True)
    print(f"@@ {name}: SetOptions budget 512 between windows -> {lib.set_options(handle, 512)}", flush=True)
    lib.call("ClearTraceData", handle)
    lib.call("SaveTrace", handle, str(out / f"{name}-cleared.json").encode())  # nothing collected
    print(f"@@ {name}: after ClearTraceData " + json.dumps(count(out / f"{name}-cleared.json")), flush=True)
    other = ctypes.c_void_p()
    lib.call("Create", ctypes.pointer(other))  # a second handle while the first lives
    lib.call("Start", handle)
    lib.call("Start", other)  # a second active session
    profile_affine.workload()
    lib.call("Stop", handle)
    lib.call("Destroy", other)
    lib.call("Destroy", handle)
    print(f"@@ {name}: done", flush=True)


def child(name: str, out: Path) -> None:
    import faulthandler

    faulthandler.enable(all_threads=True)
    case = all_cases(12)[name]
    {"windows": child_windows, "budget": child_budget, "probe": child_probe}[case["group"]](case, out, name)


# --- the parent: each case in a child, a table at the end ---------------------------------------


def all_cases(windows: int) -> dict[str, dict]:
    return {**probe_cases(), **window_cases(windows), **budget_cases()}


SIGNALS = {-6: "SIGABRT", -11: "SIGSEGV", -7: "SIGBUS", -9: "SIGKILL", -4: "SIGILL"}


def run_one(name: str, case: dict, repeat: int, out: Path, timeout: float) -> dict:
    env = dict(os.environ)
    if case.get("perturb"):
        env["MALLOC_PERTURB_"] = "165"
    env.update(case.get("env", {}))
    logs = out / "logs"
    start = time.monotonic()
    try:
        run = subprocess.run([sys.executable, __file__, "--child", name, str(out)], capture_output=True,
                             text=True, timeout=timeout, env=env, errors="replace")  # fmt: skip
        code, text = run.returncode, run.stdout + run.stderr
    except subprocess.TimeoutExpired as error:
        parts = (error.stdout, error.stderr)
        code = "timeout"
        text = "".join(p.decode(errors="replace") if isinstance(p, bytes) else (p or "") for p in parts)
    seconds = round(time.monotonic() - start, 1)
    (logs / f"{name}-r{repeat}.log").write_text(text)
    mine = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith(f"@@ {name}: ")]
    windows = [json.loads(line.split(" ", 2)[2]) for line in mine if line.startswith("window ")]
    calls = [line for line in mine if " -> " in line]
    failed = [c for c in calls if not c.endswith("-> 0")]
    notes = [line for line in mine if " -> " not in line and not line.startswith(("window ", "done"))]
    said = {
        "case": name,
        "repeat": repeat,
        "exit": SIGNALS.get(code, code),
        "done": "done" in mine,
        "seconds": seconds,
        "windows_saved": sum(1 for w in windows if w.get("saved", True)),
        "first_windows": [[w.get("launches"), w.get("ranges"), w.get("marks")] for w in windows][:3],
        "last_window": windows[-1] if windows else None,
        "refused": failed[:6],
        "notes": notes[:4],
        "tail": [line[:200] for line in text.splitlines() if line and not line.startswith("@@")][-3:],
    }
    if case.get("group") == "budget":
        said["budget_window"] = [line for line in mine if line.startswith("window_s")][:1]
    return said


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--group", default="all")
    parser.add_argument("--only", default="")
    parser.add_argument("--skip", default="")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each windows case")
    parser.add_argument("--budget-repeats", type=int, default=1, help="runs of each budget case")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--windows", type=int, default=12)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--deadline", type=float, default=0, help="launch no run after S seconds")
    args = parser.parse_args()
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    cases = all_cases(args.windows)
    chosen = [n for n in cases if args.group == "all" or cases[n]["group"] == args.group]
    if args.only:
        chosen = [n for n in chosen if any(part in n for part in args.only.split(","))]
    if args.skip:
        chosen = [n for n in chosen if not any(part in n for part in args.skip.split(","))]
    # windows first (several runs each: their crashes come by chance), then one run of each budget
    runs = [(n, r) for n in chosen if cases[n]["group"] == "probe" for r in (1,)]
    runs += [(n, r) for r in range(1, args.repeats + 1) for n in chosen if cases[n]["group"] == "windows"]
    runs += [
        (n, r) for r in range(1, args.budget_repeats + 1) for n in chosen if cases[n]["group"] == "budget"
    ]
    began = time.monotonic()
    results = []

    def one(item):
        name, repeat = item
        if args.deadline and time.monotonic() - began > args.deadline:
            return None
        said = run_one(name, cases[name], repeat, out, args.timeout)
        line = json.dumps(said)
        print(line, flush=True)
        with open(out / "results.jsonl", "a") as handle:
            handle.write(line + "\n")
        return said

    with ThreadPoolExecutor(args.jobs) as pool:
        results = [r for r in pool.map(one, runs) if r is not None]
    table(results, len(runs))


def table(results: list[dict], asked: int) -> None:
    by_case: dict[str, list[dict]] = {}
    for said in results:
        by_case.setdefault(said["case"], []).append(said)
    print(f"\n{'case':44} lived/ran  exits            windows saved  last window (launches, ranges, marks)")
    for name, runs in by_case.items():
        lived = sum(1 for r in runs if r["done"])
        exits = ",".join(sorted({str(r["exit"]) for r in runs}))
        saved = "/".join(str(r["windows_saved"]) for r in runs)
        last = runs[-1]["last_window"] or {}
        print(f"{name:44} {lived}/{len(runs):<7}  {exits:16} {saved:14} "
              f"{last.get('launches')}, {last.get('ranges')}, {last.get('marks')}")  # fmt: skip
    print(f"{len(results)} of {asked} runs made")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]))
    else:
        main()
