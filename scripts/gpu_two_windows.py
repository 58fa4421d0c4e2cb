"""Two ``iket_cli.window`` captures in one process, each variant in a process of its own with
faulthandler on (a SIGSEGV prints where Python was).

    python3 scripts/gpu_two_windows.py OUT

On the GPU (2026-12-07, H100) the second window of a pytest run and of a notebook died of
SIGSEGV after its Start, while two bare sessions of the C ABI in one process, in every
order (scripts/gpu_sessions.py), did not. Variants:
  window      two windows around profile_affine.workload()
  no-split    the same with the injection's lines left on fds 1 and 2 (no fdsplit)
  session     two Session objects (iket's wrapper of the C ABI), no window
  model       a window around the seed, then one around call 3 of the bf16 model's kernel
  small       window, each with 64 timestamps a warp and a 64 MiB buffer (the bare sessions')
  json        window, each finished with the trace JSON alone (no Perfetto, report or lint)
  samelib     window, the session library loaded once (not once a window)
  session-finish  session, with what a window does to finish its capture run between the two
  warm        window, the kernel run once before the first (every module loaded before it)
  warm-model  warm, the model's step run once too, then a window around the seed and one
              around call 3 of the model's kernel (the notebook's order)
Prints one JSON line per variant: its exit status and the last lines it printed.
"""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
VARIANTS = ["window", "no-split", "session", "model", "small", "json", "samelib", "session-finish"]


def child(variant: str, out: Path) -> None:
    sys.path[:0] = [str(HERE / "examples"), str(HERE)]
    import iket_cli

    iket_cli.prepare()
    import faulthandler
    import threading

    import profile_affine

    faulthandler.enable(all_threads=True)  # over TVM's handler, which prints C frames only

    if variant == "no-split":
        from contextlib import nullcontext

        from iket_cli.system import fdsplit

        class Kept:
            def __init__(self, *args, **kwargs):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return None

        fdsplit.Split = Kept
        del nullcontext
    if variant == "samelib":
        import functools

        from iket_cli.capture.in_process import session as S

        S.load = functools.lru_cache(maxsize=None)(S.load)
    if variant in ("reuse-perfetto", "fresh-perfetto", "precompiled-perfetto"):
        import ctypes

        import torch

        from iket_cli.capture.in_process import session as S

        lib = S.load(S.find_library(None))
        kept = []

        def call(name, *args):
            result = getattr(lib, f"IketProfilingSession{name}")(*args)
            assert result == 0, (name, result)

        def create():
            handle, options = ctypes.c_void_p(), S.Options()
            options.struct_size = ctypes.sizeof(S.Options)
            call("Create", ctypes.pointer(handle))
            call("OptionsInit", ctypes.pointer(options))
            call("SetOptions", handle, ctypes.pointer(options))
            kept.append(options)
            return handle

        handle = create()
        from tvm_tirx.backend.cuda.iket import IketProfiler

        compiled = IketProfiler().compile(profile_affine.profiled_affine, target="cuda")
        a = torch.arange(32, dtype=torch.float32, device="cuda")
        b = torch.empty_like(a)
        for number in (1, 2):
            call("Start", handle)
            if variant == "precompiled-perfetto":
                compiled(a, b)
            else:
                profile_affine.workload()
            torch.cuda.synchronize()
            call("Stop", handle)
            call("SaveTrace", handle, str(out / f"session-{number}.json").encode())
            print(f"{variant}: session {number} saved", flush=True)
            if number == 1:
                if variant in ("reuse-perfetto", "precompiled-perfetto"):
                    call("ClearTraceData", handle)
                else:
                    call("Destroy", handle)
                _part_of_finishing("perfetto", out / "session-1.json", out)
                if variant == "fresh-perfetto":
                    handle = create()
        call("Destroy", handle)
        return
    if variant.startswith("session"):
        import torch

        from iket_cli.capture.in_process import session as S

        lib = S.load(S.find_library(None))
        for number in (1, 2):
            with S.Session(lib, S.Settings(max_ts_cnt_per_warp=64)) as session:
                profile_affine.workload()
                torch.cuda.synchronize()
                session.stop()
                session.save(out / f"session-{number}.json")
            print(f"{variant}: session {number} saved", flush=True)
            if variant == "session-finish" and number == 1:
                _finish_like_a_window(out / "session-1.json", out / "finished")
                print(f"{variant}: finished like a window", flush=True)
            if variant.startswith("session-") and variant != "session-finish" and number == 1:
                _part_of_finishing(variant.removeprefix("session-"), out / "session-1.json", out)
                print(f"{variant}: {variant} done", flush=True)
        return
    if variant.startswith("warm"):
        profile_affine.workload()
        if variant == "warm-model":
            import model_step

            model_step.main()
        print(f"{variant}: every kernel loaded", flush=True)
    options = {"clobber": True}
    if variant == "small":
        options.update(max_ts_cnt_per_warp=64, context_buffer_size=64 << 20)
    if variant == "json":
        options.update(postprocess="json")
    with iket_cli.window(out / f"{variant}-1", **options) as first:
        profile_affine.workload()
    print(f"{variant}: window 1 {first.capture.manifest['status']}", flush=True)
    print(f"{variant}: threads {[t.name for t in threading.enumerate()]}", flush=True)
    if variant in ("model", "warm-model"):
        import model_step

        second = iket_cli.window(out / f"{variant}-2", clobber=True)
        model_step.affine = _nth(model_step.affine, 3, second)
        model_step.main()
    else:
        with iket_cli.window(out / f"{variant}-2", **options) as second:
            profile_affine.workload()
    print(f"{variant}: window 2 {second.capture.manifest['status'] if second.capture else None}", flush=True)


def _finish_like_a_window(trace: Path, folder: Path) -> None:
    """A window's finishing steps (:func:`iket_cli.pipeline.window_finish.finished`) on a
    saved trace, in this process: compacted, exported, linted, reported, published."""
    import shutil
    import time
    from datetime import datetime, timezone

    from iket_cli.capture.staging import Staging
    from iket_cli.model.vocab import formats_for
    from iket_cli.pipeline.window_finish import Closed, finished

    staging = Staging.create(folder)
    staging.capture_dir.mkdir()
    copy = staging.capture_dir / "iket_pid_0x1.trace.json"
    shutil.copy(trace, copy)
    closed = Closed(staging, 1, "here", datetime.now(timezone.utc), time.monotonic(), 0.1,
                    tuple(formats_for("all")), "info", {"max_ts_cnt_per_warp": 64})  # fmt: skip
    finished(closed, copy)
    staging.publish()


def _part_of_finishing(part: str, trace: Path, out: Path) -> None:
    """One step of a window's finishing, to bisect what breaks the next session."""
    import shutil

    if part == "threads":
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda x: x * x, range(8)))
    elif part == "numpy":
        import numpy as np

        np.arange(1 << 20).sum()
    elif part == "load":
        from iket_cli.model import trace as trace_mod
        from iket_cli.pipeline import trace_exports

        copy = out / "iket_pid_0x1.trace.json"
        shutil.copy(trace, copy)
        trace_exports.compact(copy)
        trace_mod.load(copy)
    elif part == "perfetto":
        from iket_cli.pipeline import trace_exports

        folder = out / "pf"
        folder.mkdir(exist_ok=True)
        shutil.copy(trace, folder / "iket_pid_0x1.trace.json")
        trace_exports.write(folder, ("json", "perfetto"))


def _nth(func, n, window):
    calls = [0]

    def wrapped(*args, **kwargs):
        calls[0] += 1
        if calls[0] != n:
            return func(*args, **kwargs)
        with window:
            return func(*args, **kwargs)

    return wrapped


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    chosen = sys.argv[2].split(",") if len(sys.argv) > 2 else VARIANTS
    for variant in chosen:
        run = subprocess.run([sys.executable, "-X", "faulthandler", __file__, "--child", variant, str(out)],
                             capture_output=True, text=True, timeout=240)  # fmt: skip
        (out / f"{variant}.log").write_text(run.stdout + run.stderr)
        said = [line for line in (run.stdout + run.stderr).splitlines() if "IketInjectionManager" not in line]
        print(json.dumps({"variant": variant, "returncode": run.returncode, "tail": said[-14:]}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]))
    else:
        main()
