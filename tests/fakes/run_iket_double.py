"""A test double of run-iket for the capture path that needs a GPU.

It *is* run-iket 4.8.1 — the real argument parsing, output-directory rules, messages,
config generation, postprocessing, stats and exit codes — with one change: after each
pass of the real workload (run with the real injection variables set), it copies the
per-process raw output that the injection library would have written on a GPU from a
recorded H200 capture: ``$IKET_DOUBLE_CAPTURE/tracker/pid_*`` after the tracker pass and
``$IKET_DOUBLE_CAPTURE/iket/pid_*`` after the capture pass. Without that variable it
behaves as run-iket does on a machine without a GPU.

A ``--warp-trace`` run replays ``$IKET_DOUBLE_WARP_CAPTURE`` instead, where that is set.
``$IKET_DOUBLE_QUEUE`` names a file of recorded captures, one a line: each capture pass
replays the next (``iket profile --repeat N`` with repeats that differ), and the tracker
pass ``$IKET_DOUBLE_CAPTURE``.
``$IKET_DOUBLE_SLEEP`` (seconds) delays each pass, for timeout and interrupt tests.
``$IKET_DOUBLE_LAUNCHED`` names a folder where workload processes that "launch a kernel"
create a file named after their pid; the recorded per-process folders are then renamed
after those pids (in pid order), as the injection library names them after the process.
"""

import os
import re
import shutil
import sys
import time
from pathlib import Path


def write_launcher(folder: Path, python: str = sys.executable) -> Path:
    """Write an executable ``run-iket`` in ``folder`` that runs this double under ``python``."""
    folder.mkdir(parents=True, exist_ok=True)
    launcher = folder / "run-iket"
    launcher.write_text(
        f"#!{python}\nimport runpy, sys\nsys.argv[0] = 'run-iket'\n"
        f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')\n"
    )
    launcher.chmod(0o755)
    return launcher


def _launch(self, tool, tool_config, env={}, job="", extra_env={}):  # noqa: B006 (run-iket's signature)
    result = _REAL_LAUNCH(self, tool, tool_config, env, job, extra_env)
    delay = float(os.environ.get("IKET_DOUBLE_SLEEP", "0"))
    if delay:
        time.sleep(delay)
    recorded = _queued(job) or os.environ.get("IKET_DOUBLE_CAPTURE")
    if "--warp-trace" in sys.argv and os.environ.get("IKET_DOUBLE_WARP_CAPTURE"):
        recorded = os.environ["IKET_DOUBLE_WARP_CAPTURE"]
    if recorded and tool and result.returncode == 0:
        launched = _launched_pids(tool)
        for number, pid_dir in enumerate(sorted((Path(recorded) / job).glob("pid_*"))):
            name = f"pid_{hex(launched[number])}" if number < len(launched) else pid_dir.name
            copy = self.get_output_dir(job) / name
            shutil.copytree(pid_dir, copy)
            _relocate(copy / "tracker.json", copy)
    return result


def _queued(job: str) -> str | None:
    """The next line of ``$IKET_DOUBLE_QUEUE`` for a capture pass (the file loses it)."""
    queue = os.environ.get("IKET_DOUBLE_QUEUE")
    if job != "iket" or not queue or not Path(queue).is_file():
        return None
    lines = Path(queue).read_text().splitlines()
    if not lines:
        return None
    Path(queue).write_text("".join(line + "\n" for line in lines[1:]))
    return lines[0]


def _launched_pids(tool: str) -> list[int]:
    """Pids that marked themselves as kernel launchers in this pass; the folder is emptied."""
    folder = os.environ.get("IKET_DOUBLE_LAUNCHED")
    if not folder or not Path(folder).is_dir():
        return []
    pids = sorted(int(p.name) for p in Path(folder).iterdir() if p.name.isdigit())
    for pid in pids:
        (Path(folder) / str(pid)).unlink()
    return pids


def _relocate(tracker_json: Path, process_dir: Path) -> None:
    """Point the recorded tracker's absolute cubin paths at the copied files."""
    if tracker_json.is_file():
        text = tracker_json.read_text()
        text = re.sub(r'"/[^"]*?/tracker/pid_[^/"]+/', lambda m: f'"{process_dir}/', text)
        tracker_json.write_text(text)


if __name__ == "__main__":
    from iket.cli import base
    from iket.cli.main import entrypoint

    _REAL_LAUNCH = base.IketRun.launch_gpu_workload
    base.IketRun.launch_gpu_workload = _launch
    sys.exit(entrypoint())
