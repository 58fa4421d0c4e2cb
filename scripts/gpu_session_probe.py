"""What the in-process IKET session (C ABI 1.0) says when it loses data: a probe for issues 51 and 52.

    python3 scripts/gpu_session_probe.py OUT.json [--budget N] [--graph] [--multi] [--log 2]

Runs in one plain python3 process (no run-iket): CUDA is started first, then the session is
created, its options set, started, the workload run, stopped and its trace saved to OUT.json.
The injection's own lines go to this process's stderr (the caller keeps them). Prints one JSON
line: each C call's result and what the saved trace holds per kernel.
"""

import argparse
import ctypes
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iket_cli.capture.in_process.session import Options


def library() -> ctypes.CDLL:
    import iket

    path = Path(iket.__file__).parent / "profiler" / "libiket_injection.so"
    return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL), path


def pretend_run_iket(lib_path: Path) -> None:
    """TIRx refuses to load an IKET kernel unless run-iket's variables name files: give it a
    tracker config (read in Python only; CUDA is already started, so the driver loads nothing)."""
    config = Path(tempfile.mkdtemp()) / "tracker.config.json"
    config.write_text(json.dumps({"toolName": "tracker", "toolConfig": {}}))
    os.environ["CUDA_INJECTION64_PATH"] = str(lib_path)
    os.environ["IKET_INJECTION_CONFIG"] = str(config)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--log", type=int, default=2)
    parser.add_argument("--graph", action="store_true")
    parser.add_argument("--multi", action="store_true")
    args = parser.parse_args()
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    lib, path = library()
    pretend_run_iket(path)
    calls = {}
    opts = Options()
    opts.struct_size = ctypes.sizeof(Options)
    calls["OptionsInit"] = lib.IketProfilingSessionOptionsInit(ctypes.byref(opts))
    opts.max_ts_per_warp = args.budget
    opts.log_level = args.log
    opts.device_buffer_size = 64 << 20
    handle = ctypes.c_void_p()
    calls["Create"] = lib.IketProfilingSessionCreate(ctypes.byref(handle))
    calls["SetOptions"] = lib.IketProfilingSessionSetOptions(handle, ctypes.byref(opts))
    start = time.perf_counter()
    calls["Start"] = lib.IketProfilingSessionStart(handle)
    error = None
    try:
        if args.graph:
            import graph_affine

            graph_affine.workload()
        elif args.multi:
            import multi_kernel

            multi_kernel.workload()
        else:
            import profile_affine

            profile_affine.workload()
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:300]
    calls["Stop"] = lib.IketProfilingSessionStop(handle)
    window = time.perf_counter() - start
    calls["SaveTrace"] = lib.IketProfilingSessionSaveTrace(handle, args.out.encode())
    calls["Destroy"] = lib.IketProfilingSessionDestroy(handle)
    held = {}
    if Path(args.out).is_file():
        trace = json.loads(Path(args.out).read_text())
        for launch in trace.get("launches", []):
            name = launch.get("kernelName", "?")[:40]
            ranges, marks = len(launch.get("ranges", [])), len(launch.get("markers", []))
            held.setdefault(name, []).append([ranges, marks])
        held["graphLaunches"] = trace.get("graphLaunches")
    print(
        json.dumps(
            {
                "budget": args.budget,
                "calls": calls,
                "window_s": round(window, 3),
                "workload_error": error,
                "held": held,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
