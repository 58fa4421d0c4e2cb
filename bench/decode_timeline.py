"""Where the time of one ``iket postprocess`` goes: a timeline of its decode, in one process.

    python bench/decode_timeline.py RAW_DIR_OR_TAR --format perfetto [--jobs N] [--rows]

Runs :func:`iket_cli.pipeline.postprocess.postprocess_capture` on a fresh copy of the raw
capture with the pool's steps timed (each worker's export of a unit, each job it writes
for a stitch or a Perfetto join, the start of a worker, the join's plan and write, the
lint and report): prints the sum of each kind of step, when the last of each ended, and
with ``--rows`` every step (start, end, thread, what). Not a test: a measuring aid for
docs/history/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pftrace import unpacked  # noqa: E402

T0 = time.monotonic()
ROWS: list[tuple[float, float, str, str, str]] = []


def _timed(owner, name: str, kind: str, label) -> None:
    """Wrap ``owner.name`` so that each call is a row of kind ``kind``."""
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            what = label(args)
            ROWS.append((start - T0, time.monotonic() - T0, threading.current_thread().name, kind, what))

    setattr(owner, name, timed)


def _instrument() -> None:
    from iket_cli.decode import schedule as plan
    from iket_cli.decode import workers
    from iket_cli.decode.split.json import columns, stitch
    from iket_cli.decode.split.json import export as json_split
    from iket_cli.decode.split.json import merge as join
    from iket_cli.decode.split.perfetto import export as pftrace_split
    from iket_cli.decode.split.perfetto import join as pftrace_join
    from iket_cli.pipeline import finish

    def unit(args) -> str:
        task = args[1]
        return f"{task.export}{task.which_launch}"

    _timed(workers.Server, "decode", "export", unit)
    _timed(workers.Server, "pieces", "job", lambda args: str(args[1].get("kind", "stitch")))
    _timed(workers.Workers, "server", "worker start", lambda args: "")
    _timed(workers.Server, "close", "worker stop", lambda args: "")
    _timed(pftrace_split, "by_launches", "perfetto split", lambda args: "")
    _timed(workers.Workers, "decode", "export whole", unit)
    _timed(workers.Workers, "forked", "export forked", unit)
    _timed(pftrace_join.Join, "add", "join plan", lambda args: Path(args[1]).name)
    _timed(pftrace_join.Join, "write", "join write", lambda args: "")
    _timed(finish, "finish", "finish", lambda args: "")
    _timed(finish.lint_mod, "lint", "lint", lambda args: "")
    _timed(finish.report_mod, "process_page", "report", lambda args: "")
    _timed(stitch.Stitch, "__init__", "stitch read", lambda args: f"{len(args[1])} chunks")
    _timed(json_split, "_join_columns", "columns join", lambda args: f"{len(args[0])} chunks")
    _timed(columns, "assemble", "columns assemble", lambda args: "")
    _timed(join.Merger, "finish", "merge finish", lambda args: "")
    _waits(plan.Slots)


def _waits(slots) -> None:
    """A row for each wait of over 5 ms for a ``--jobs`` slot (``slot wait``; urgent or not)."""
    original = slots.__call__

    @contextlib.contextmanager
    def timed(self, *, urgent: bool = False):
        start = time.monotonic()
        with original(self, urgent=urgent):
            if time.monotonic() - start > 0.005:
                ROWS.append(
                    (
                        start - T0,
                        time.monotonic() - T0,
                        threading.current_thread().name,
                        "slot wait",
                        "urgent" if urgent else "",
                    )
                )
            yield

    slots.__call__ = timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="a raw capture: a folder holding iket/, or a .tar.xz of one")
    parser.add_argument("--format", default="perfetto")
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--rows", action="store_true", help="print every step")
    args = parser.parse_args()
    _instrument()
    from iket_cli.model.vocab import FORMATS
    from iket_cli.pipeline.postprocess import postprocess_capture

    formats = list(FORMATS) if args.format == "all" else args.format.split(",")

    work = Path(tempfile.mkdtemp(prefix="iket-timeline-"))
    try:
        target = work / "capture"
        shutil.copytree(unpacked(work, args.raw) / "iket", target / "iket")
        start = time.monotonic()
        postprocess_capture(target, formats, jobs=args.jobs)
        total = time.monotonic() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)
    began = start - T0
    if args.rows:
        for row in sorted(ROWS):
            print(f"{row[0] - began:7.3f} {row[1] - began:7.3f} {row[2][-10:]:>10} {row[3]:<13} {row[4]}")
    sums: dict[str, list[float]] = defaultdict(list)
    last: dict[str, float] = {}
    for first, end, _, kind, _ in ROWS:
        sums[kind].append(end - first)
        last[kind] = max(last.get(kind, 0.0), end - began)
    print(f"postprocess {args.format}: {total:.2f} s")
    print("| step | count | sum (s) | mean (s) | last ends at (s) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind, seconds in sorted(sums.items(), key=lambda item: -sum(item[1])):
        mean = sum(seconds) / len(seconds)
        print(f"| {kind} | {len(seconds)} | {sum(seconds):.2f} | {mean:.3f} | {last[kind]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
