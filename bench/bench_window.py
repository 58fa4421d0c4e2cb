"""Issue 52 on a GPU: one run in-process (``--window``, ``--one-pass``) against the two passes
and raw run-iket, side by side, interleaved, ``--runs`` times each.

    python3 bench/bench_window.py --case seed|model|big [--runs 3] [--json FILE]

* ``seed`` (``examples/profile_affine.py``): ``one-pass`` (``iket profile --one-pass``),
  ``two-pass`` (``iket profile --tracker fresh``), ``raw`` (``run-iket profile`` of the same call)
* ``model`` (``examples/model_step.py``, bf16, its kernel's third call; ``KERNEL=cute``: the
  CuTe DSL kernel's): ``window`` (``--window model_tirx_kernel:affine --calls 3``: the run stops
  after the call, as ``--extract``'s record run does), ``window-whole`` (``--no-stop-after``: the
  model trains to its end), ``extract`` (``--extract ... --calls 3``), ``plain`` (the model's own
  run, readied as iket's hook readies it: :data:`PLAIN`)
* ``big`` (``tests/fixtures/workloads/big_kernel.py``, ITERS=512, 3 launches: 4.87M events):
  ``one-pass`` (the library's budget, 256: must say INCOMPLETE; the 1,538 timestamps a warp the
  kernel needs kill run-iket 4.8.1's session, so iket refuses them in one pass:
  docs/capture.md), ``two-pass``, ``raw``

Prints a markdown table: median wall seconds, the ratio to the anchor (``raw``; ``extract`` for
``model``, and to ``plain``), and what each capture holds (ranges, marks), so that equal captures
are compared; for ``model``, whether the losses of ``window-whole`` equal ``plain``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


#: The model's own run as iket's hook readies it, with no window: TIRx's kernel loads outside
#: run-iket only once its check is stood aside (``iket_cli.prepare``; run bare, it refuses).
PLAIN = (
    "import runpy, sys; sys.path[:0] = ['examples']; import iket_cli; iket_cli.prepare(); "
    "runpy.run_path('examples/model_step.py', run_name='__main__')"
)


def _iket(*args: str) -> list[str]:
    return [PY, "-m", "iket_cli", "profile", "--clobber", "-q", *args]


def _raw(out: Path, code: str) -> list[str]:
    run_iket = shutil.which("run-iket") or "run-iket"
    return [
        run_iket,
        "-o",
        str(out),
        "--clobber",
        "profile",
        "--postprocess",
        "all",
        "--",
        "python3",
        "-c",
        code,
    ]


def variants(case: str, work: Path) -> tuple[dict[str, tuple[list[str], Path]], str]:
    """Each variant's command line and capture folder, and the anchor's name."""
    if case == "seed":
        code = "import profile_affine as p; p.workload()"
        target = "examples/profile_affine.py:workload"
    elif case == "big":
        code = "import big_kernel as b; b.workload()"
        target = "tests/fixtures/workloads/big_kernel.py:workload"
    if case in ("seed", "big"):
        found = {
            "one-pass": (_iket(target, "--one-pass", "-o", str(work / "one")), work / "one"),
            "two-pass": (_iket(target, "--tracker", "fresh", "-o", str(work / "two")), work / "two"),
            "raw": (_raw(work / "raw", code), work / "raw"),
        }
        return found, "raw"
    module = "model_cute_kernel" if os.environ.get("KERNEL") == "cute" else "model_tirx_kernel"
    chosen = (f"{module}:affine", "--calls", "3")
    model = "examples/model_step.py"
    return {
        "window": (_iket(model, "--window", *chosen, "-o", str(work / "w")), work / "w"),
        "window-whole": (
            _iket(model, "--window", *chosen, "--no-stop-after", "-o", str(work / "ww")), work / "ww"
        ),
        "extract": (_iket(model, "--extract", *chosen, "-o", str(work / "x")), work / "x"),
        "plain": ([PY, "-c", PLAIN], work / "plain"),
    }, "extract"  # fmt: skip


def _complete(folder: Path) -> bool | None:
    """What the capture's manifest says of its completeness (-q keeps the INCOMPLETE line off
    stderr; the manifest always has it)."""
    try:
        return json.loads((folder / "manifest.json").read_text())["completeness"]["complete"]
    except (OSError, KeyError, TypeError, ValueError):
        return None


def held(folder: Path) -> dict:
    """Ranges and marks per name in the capture's trace JSON (json.load: an independent count),
    and each range name's median duration in ns (``p50``)."""
    ranges, marks, launches, spans = {}, {}, 0, {}
    for path in sorted(folder.glob("iket_pid_*.trace.json")):
        trace = json.loads(path.read_text())
        names = trace["stringTable"]
        for launch in trace["launches"] + [x for v in trace["graphLaunches"].values() for x in v]:
            launches += 1
            for r in launch["ranges"]:
                ranges[names[r["rangeNameIdx"]]] = ranges.get(names[r["rangeNameIdx"]], 0) + 1
                spans.setdefault(names[r["rangeNameIdx"]], []).append(r["endTs"] - r["startTs"])
            for m in launch["markers"]:
                marks[names[m["markerNameIdx"]]] = marks.get(names[m["markerNameIdx"]], 0) + 1
    p50 = {name: statistics.median_low(values) for name, values in spans.items()}
    return {"launches": launches, "ranges": ranges, "marks": marks, "p50": p50}


def _table(case: str, times: dict[str, list[float]], anchor: str) -> None:
    """The markdown table: median seconds, ratios to the anchor (and to ``plain`` where run)."""
    medians = {name: statistics.median(seconds) if seconds else None for name, seconds in times.items()}
    others = [name for name in (anchor, "plain") if name in times]
    heads = " | ".join(f"ratio to {name}" for name in others)
    print(f"\n| {case} | median s | {heads} | runs |\n|---|---|{'---|' * len(others)}---|")
    for name, median in medians.items():
        ratios = " | ".join(
            f"{median / medians[other]:.2f}" if median and medians[other] else "-" for other in others
        )
        print(f"| {name} | {median and round(median, 2)} | {ratios} | {len(times[name])} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=("seed", "model", "big"), default="seed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    paths = [ROOT / "examples", ROOT / "tests/fixtures/workloads", ROOT]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")])}
    if args.case == "big":
        env.update(ITERS="512", LAUNCHES="3")
    work = Path(tempfile.mkdtemp(prefix="bench-window-"))
    found, anchor = variants(args.case, work)
    times: dict[str, list[float]] = {name: [] for name in found}
    out: dict[str, dict] = {}
    for run in range(args.runs):
        for name, (argv, folder) in found.items():
            start = time.perf_counter()
            done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            losses = [
                line.split()[-1] for line in done.stdout.splitlines() if line.startswith("model_step: step")
            ]
            if done.returncode != 0:
                print(
                    f"{name} run {run + 1}: exit {done.returncode}: {done.stderr.strip()[-600:]}", flush=True
                )
                continue
            times[name].append(seconds)
            found_held = held(folder) if folder.is_dir() else None
            out[name] = {"held": found_held, "losses": losses, "complete": _complete(folder)}
            print(
                json.dumps({"variant": name, "run": run + 1, "s": round(seconds, 2), **out[name]})[:700],
                flush=True,
            )
    _table(args.case, times, anchor)
    if "plain" in out and "window-whole" in out:
        same = out["plain"]["losses"] == out["window-whole"]["losses"]
        print(f"\nlosses of window-whole equal plain's: {same} ({out['window-whole']['losses']})")
    if args.json:
        args.json.write_text(json.dumps({"times": times, "held": out}, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
