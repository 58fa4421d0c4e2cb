"""Issue 52 on the GPU: ``iket_cli.window`` in a live process (no run-iket, no relaunch).

    python3 scripts/gpu_window.py OUT seed     the seed kernel in a window; iket show against
                                               a recount from the trace JSON
    python3 scripts/gpu_window.py OUT model [--window N]
                                               examples/model_step.py, its TIRx kernel's N-th
                                               call in a window while the bf16 model trains
                                               (no --window: the same run without one)
    python3 scripts/gpu_window.py OUT budget   the seed kernel at max_ts_cnt_per_warp=1

Prints one JSON line: wall times, the window's, the capture's record counts and status,
the completeness record's verdict, and the model's losses.
"""

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(HERE / "examples"), str(HERE)]
START = time.perf_counter()

import iket_cli  # noqa: E402


def recount(trace_json: Path) -> dict:
    """Ranges and marks per name, counted from the JSON by json.load (not iket's reader)."""
    trace = json.loads(trace_json.read_text())
    names = trace["stringTable"]
    launches = trace["launches"] + [x for v in trace["graphLaunches"].values() for x in v]
    ranges = Counter(names[r["rangeNameIdx"]] for x in launches for r in x["ranges"])
    marks = Counter(names[m["markerNameIdx"]] for x in launches for m in x["markers"])
    return {"launches": len(launches), "ranges": dict(ranges), "marks": dict(marks)}


def shown(folder: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "iket_cli", "show", str(folder), "--format", "json"],
                         capture_output=True, text=True)  # fmt: skip
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-300:]}
    ranges, marks = Counter(), Counter()
    for process in json.loads(out.stdout)["processes"]:
        for kernel in process["kernels"]:
            for r in kernel["ranges"]:
                ranges[r["name"]] += r["durations"]["count"]
            for m in kernel["markers"]:
                marks[m["name"]] += m["count"]
    return {"ranges": dict(ranges), "marks": dict(marks)}


def report(out: Path, capture, extra: dict) -> None:
    record = capture.manifest if capture else {}
    trace = capture.trace_json if capture else None
    line = {
        "wall_s": round(time.perf_counter() - START, 2),
        "window_s": record.get("phases", {}).get("window"),
        "status": record.get("status"),
        "complete": (record.get("completeness") or {}).get("complete"),
        "losses": [loss["message"][:160] for loss in (record.get("completeness") or {}).get("losses", [])],
        "files": sorted(p.name for p in capture.output_dir.iterdir()) if capture else None,
        **extra,
    }
    if trace is not None:
        line["recount"] = recount(trace)
        line["shown"] = shown(capture.output_dir)
        line["show_equals_recount"] = {k: line["shown"].get(k) for k in ("ranges", "marks")} == {
            k: line["recount"][k] for k in ("ranges", "marks")
        }
    print(json.dumps(line), flush=True)


def main() -> None:
    out, what = Path(sys.argv[1]), sys.argv[2]
    if what in ("seed", "budget"):
        import profile_affine

        options = {"max_ts_cnt_per_warp": 1} if what == "budget" else {}
        with iket_cli.window(out / f"w_{what}", clobber=True, **options) as w:
            profile_affine.workload()
        report(out, w.capture, {"case": what})
        return
    iket_cli.prepare()  # the model runs its TIRx kernel (outside run-iket) before the window
    import model_step
    import torch

    chosen = int(sys.argv[sys.argv.index("--window") + 1]) if "--window" in sys.argv else None
    original, seen, losses, windows = model_step.affine, [0], [], []

    def affine(x):
        seen[0] += 1
        if seen[0] != chosen:
            return original(x)
        with iket_cli.window(out / "w_model", clobber=True) as w:
            result = original(x)
        windows.append(w)
        return result

    model_step.affine = affine
    printed = print

    def keep(*args, **kwargs):
        text = " ".join(map(str, args))
        if text.startswith("model_step: step"):
            losses.append(text.split()[-1])
        printed(*args, **kwargs)

    model_step.print = keep
    model_step.main()
    torch.cuda.synchronize()
    report(
        out,
        windows[0].capture if windows else None,
        {"case": "model", "window": chosen, "losses": losses, "calls": seen[0]},
    )


if __name__ == "__main__":
    main()
