"""Two in-process IKET sessions in one process: which sequences of the C ABI survive?

    python3 scripts/gpu_sessions.py            every variant, each in a process of its own

On the GPU (2026-12-07, H100), a second ``iket_cli.window`` in one process (a pytest run's
second marked test, a notebook's second ``%%iket`` cell) died of SIGSEGV after its Start. The
variants, the seed kernel (examples/profile_affine.py) in each session:
  fresh       Create..Destroy, then Create..Destroy again (what iket does), kernel compiled once
  recompile   the same, the kernel compiled again inside the second session
  reuse       one handle: Start, Stop, SaveTrace, ClearTraceData, Start, Stop, SaveTrace, Destroy
  reuse-keep  the same without ClearTraceData
  no-destroy  the first session stopped and saved but not destroyed; a second Create..Destroy
  fresh-unload    fresh, each kernel compiled inside its session, the first one freed
                  (its CUDA module unloaded) after the first Destroy
  early-unload    the same, the first kernel freed before the first Destroy
  reuse-unload    reuse (ClearTraceData), the first kernel freed between the two windows
Prints one JSON line per variant: how its process ended and the launches in each saved trace.
"""

import ctypes
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
VARIANTS = ["fresh", "recompile", "reuse", "reuse-keep", "no-destroy",
            "fresh-unload", "early-unload", "reuse-unload"]  # fmt: skip


def child(variant: str, out: Path) -> None:
    sys.path[:0] = [str(HERE / "examples"), str(HERE)]
    import iket_cli
    from iket_cli.capture.in_process import session as S

    iket_cli.prepare()
    import profile_affine
    import torch
    from tvm_tirx.backend.cuda.iket import IketProfiler

    lib = S.load(S.find_library(None))
    compiled = IketProfiler().compile(profile_affine.profiled_affine, target="cuda")
    a = torch.arange(32, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    compiled(a, b)
    torch.cuda.synchronize()

    def call(name, *args):
        result = getattr(lib, f"IketProfilingSession{name}")(*args)
        print(f"{variant}: {name} -> {result}", flush=True)
        return result

    def create():
        handle = ctypes.c_void_p()
        call("Create", ctypes.pointer(handle))
        options = S.Options()
        options.struct_size = ctypes.sizeof(S.Options)
        call("OptionsInit", ctypes.pointer(options))
        options.max_ts_per_warp, options.device_buffer_size = 64, 64 << 20
        call("SetOptions", handle, ctypes.pointer(options))
        return handle

    def window(handle, number, kernel):
        call("Start", handle)
        kernel(a, b)
        torch.cuda.synchronize()
        call("Stop", handle)
        call("SaveTrace", handle, str(out / f"{variant}-{number}.json").encode())

    if variant.endswith("unload"):
        import gc

        reuse = variant == "reuse-unload"
        handle = create()
        call("Start", handle)
        first = IketProfiler().compile(profile_affine.profiled_affine, target="cuda")
        first(a, b)
        torch.cuda.synchronize()
        call("Stop", handle)
        call("SaveTrace", handle, str(out / f"{variant}-1.json").encode())
        if variant == "early-unload":
            del first
            gc.collect()
        if reuse:
            call("ClearTraceData", handle)
        else:
            call("Destroy", handle)
        if variant != "early-unload":
            del first
            gc.collect()
        if not reuse:
            handle = create()
        call("Start", handle)
        second = IketProfiler().compile(profile_affine.profiled_affine, target="cuda")
        second(a, b)
        torch.cuda.synchronize()
        call("Stop", handle)
        call("SaveTrace", handle, str(out / f"{variant}-2.json").encode())
        call("Destroy", handle)
    elif variant in ("fresh", "recompile"):
        first = create()
        window(first, 1, compiled)
        call("Destroy", first)
        second = create()
        kernel = compiled
        if variant == "recompile":
            call("Start", second)
            kernel = IketProfiler().compile(profile_affine.profiled_affine, target="cuda")
            kernel(a, b)
            torch.cuda.synchronize()
            call("Stop", second)
            call("SaveTrace", second, str(out / f"{variant}-2.json").encode())
        else:
            window(second, 2, kernel)
        call("Destroy", second)
    elif variant in ("reuse", "reuse-keep"):
        handle = create()
        window(handle, 1, compiled)
        if variant == "reuse":
            call("ClearTraceData", handle)
        window(handle, 2, compiled)
        call("Destroy", handle)
    elif variant == "no-destroy":
        first = create()
        window(first, 1, compiled)
        second = create()
        window(second, 2, compiled)
        call("Destroy", second)
        call("Destroy", first)
    torch.testing.assert_close(b, 2 * a + 1)
    print(f"{variant}: done", flush=True)


def launches(path: Path):
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return len(data.get("launches", [])) + sum(len(v) for v in data.get("graphLaunches", {}).values())


def main() -> None:
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/iket-sessions")
    out.mkdir(parents=True, exist_ok=True)
    chosen = sys.argv[3].split(",") if len(sys.argv) > 3 else VARIANTS
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    for variant in [v for v in chosen for _ in range(repeats)]:
        run = subprocess.run([sys.executable, __file__, "--child", variant, str(out)],
                             capture_output=True, text=True, timeout=180)  # fmt: skip
        (out / f"{variant}.log").write_text(run.stdout + run.stderr)
        mine = [line for line in run.stdout.splitlines() if line.startswith(f"{variant}: ")]
        calls = [line.split(": ", 1)[1] for line in mine]
        counted = [launches(out / f"{variant}-{n}.json") for n in (1, 2)]
        said = {"variant": variant, "returncode": run.returncode, "calls": calls, "launches": counted}
        print(json.dumps(said), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]))
    else:
        main()
