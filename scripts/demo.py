"""Run ``iket profile`` for real on any machine, GPU or not, and show what it made.

Without a GPU, the capture pass replays a raw capture recorded on an NVIDIA H200
(``tests/fixtures/affine``) through run-iket itself (``tests/fakes/run_iket_double.py``):
the real run-iket parses, generates the config, decodes and writes the artifacts, and
the real ``iket`` CLI stages, checks and publishes them. On a GPU machine, run instead:

    iket profile examples/profile_affine.py:workload -o iket-affine

The capture is kept in ``./iket-demo`` (``-o DIR`` chooses another folder; a demo run again
replaces its own): the README's reading commands run on it as written (``iket show iket-demo``).
The demo's own scratch files (the run-iket stand-in, the workload) go to a temporary folder,
removed at the end whatever happens.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where the capture is kept unless -o says otherwise (relative to the current folder).
DEFAULT_OUT = "iket-demo"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-o", "--output", "--keep", dest="out", metavar="DIR", type=Path, default=Path(DEFAULT_OUT),
        help=f"where the capture is kept (default ./{DEFAULT_OUT})",
    )  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iket-demo-"))
    try:
        return demo(work, args.out.resolve())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def demo(work: Path, out: Path) -> int:
    double = runpy.run_path(str(ROOT / "tests/fakes/run_iket_double.py"))
    launcher = double["write_launcher"](work / "bin")
    workload = work / "affine.py"
    workload.write_text("def workload():\n    print('workload ran (kernel output replayed from an H200)')\n")
    env = {**os.environ, "IKET_DOUBLE_CAPTURE": str(ROOT / "tests/fixtures/affine")}
    cmd = [
        sys.executable,
        "-m",
        "iket_cli",
        "profile",
        f"{workload}:workload",
        "-o",
        str(out),
        "--clobber",
        "--run-iket",
        str(launcher),
    ]
    print("$", " ".join(cmd), flush=True)
    code = subprocess.call(cmd, env=env, cwd=work)
    if code == 0:
        manifest = json.loads((out / "manifest.json").read_text())
        print(json.dumps({k: manifest[k] for k in ("status", "mode", "phases")}, indent=2))
        show = [sys.executable, "-m", "iket_cli", "show", str(out)]
        print("$", " ".join(show), flush=True)
        code = subprocess.call(show)
    if code == 0:
        shown = os.path.relpath(out) if not os.path.relpath(out).startswith("..") else str(out)
        print(
            f"\nThe capture is kept in {shown}/: iket show {shown}, iket lint {shown}, "
            f"iket report {shown} -o report.html, or open {shown}/iket_pid_0x204.html in a browser."
        )
    print("On a GPU machine: iket profile examples/profile_affine.py:workload -o iket-affine")
    return code


if __name__ == "__main__":
    sys.exit(main())
