"""Decoding raw captures into run-iket's artifacts, in parallel, on any machine.

run-iket decodes one process after another, one format after another, on one core, and
compresses the HTML viewer's trace with gzip level 9. Here each (process, export) pair is
a task — the JSON export, and the Perfetto export that also feeds the HTML viewer — and
tasks run in parallel worker processes, bounded by the CPU count and by the memory that is
free. A worker is a child process of its own, so a decoder that crashes on a corrupt
capture fails that task alone. Artifacts keep run-iket's names and the JSON is
byte-for-byte what run-iket writes; the ``.pftrace.gz`` uses level 6 (same size, a tenth
of the time) and a zero timestamp, so it is reproducible.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import splitjson
from .errors import CaptureInterrupted, UsageError
from .runner import Terminated, sigterm_as_exception

FORMATS = ("perfetto", "json", "html")
GZIP_LEVEL = 6
#: Below this many raw bytes a capture is decoded in-process: spawning costs more than it saves.
INLINE_BYTES = 4 << 20
#: Peak memory of a task as a multiple of its raw ``iket.data.bin`` (keep256: 11.8 MB raw
#: gives 288 MB of JSON, held once by the decoder and once as a Python string).
MEMORY_FACTOR = {"json": 60, "perfetto": 20}


@dataclass(frozen=True)
class Task:
    """One export of one process's raw capture: ``json``, or ``perfetto`` (+ html)."""

    pid_hex: str
    raw: Path
    out_dir: Path
    export: str
    formats: tuple[str, ...]

    @property
    def raw_bytes(self) -> int:
        try:
            return (self.raw.parent / "iket.data.bin").stat().st_size
        except OSError:
            return 0

    def outputs(self) -> list[str]:
        stem = f"iket_pid_{self.pid_hex}"
        if self.export == "json":
            return [f"{stem}.trace.json"]
        names = [f"{stem}.pftrace"] if "perfetto" in self.formats else []
        return names + ([f"{stem}.pftrace.gz"] if "html" in self.formats else [])


@dataclass
class Outcome:
    """How one task ended."""

    task: Task
    seconds: float
    error: str | None = None
    written: list[str] = field(default_factory=list)


def find_raw(capture_dir: Path) -> list[tuple[str, Path]]:
    """``(pid_hex, iket.data.json)`` of every process run-iket kept under ``iket/``."""
    root = capture_dir / "iket"
    if not root.is_dir():
        return []
    found = []
    for entry in sorted(os.listdir(root)):
        if entry.startswith("pid_0x") and (root / entry).is_dir():
            found.append((entry[4:].lower(), root / entry / "iket.data.json"))
    return found


def plan(capture_dir: Path, formats: list[str]) -> list[Task]:
    """The tasks that produce ``formats`` for every kept process, largest first."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise UsageError(f"unknown format {unknown[0]!r}", hint=f"use {', '.join(FORMATS)} or all")
    # The HTML report is built from the JSON trace (see report.py), and carries the
    # gzip'd Perfetto trace beside it for its "Open in Perfetto UI" button.
    exports = (["json"] if {"json", "html"} & set(formats) else []) + (
        ["perfetto"] if {"perfetto", "html"} & set(formats) else []
    )
    tasks = [
        Task(pid_hex, raw, capture_dir, export, tuple(formats))
        for pid_hex, raw in find_raw(capture_dir)
        for export in exports
    ]
    return sorted(tasks, key=lambda t: -t.raw_bytes * MEMORY_FACTOR[t.export])


def default_jobs(tasks: list[Task], requested: int | None = None) -> int:
    """Workers to use: requested or the CPUs, no more than tasks, and what memory allows."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    jobs = max(1, min(requested or cpus or 1, len(tasks) or 1))
    biggest = max((t.raw_bytes * MEMORY_FACTOR[t.export] for t in tasks), default=0)
    available = _mem_available()
    if biggest and available:
        jobs = max(1, min(jobs, available // biggest))
    return jobs


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Progress:
    """What :func:`run` reports while it decodes. The default says nothing."""

    def started(self, task: Task) -> None:
        """A task began."""

    def finished(self, outcome: Outcome) -> None:
        """A task ended, well or not."""


def run(tasks: list[Task], *, jobs: int | None = None, progress: Progress | None = None) -> list[Outcome]:
    """Run every task; never raises for a task's failure (see ``Outcome.error``)."""
    progress = progress or Progress()
    workers = default_jobs(tasks, jobs)
    lock = threading.Lock()

    def one(task: Task) -> Outcome:
        with lock:
            progress.started(task)
        missing = _missing_input(task)  # the decoder aborts its process on a truncated file
        if missing:
            outcome = Outcome(task, 0.0, error=missing)
        elif task.raw_bytes <= INLINE_BYTES and _can_decode_inline():
            outcome = decode_inline(task)
        else:
            outcome = _decode_in_child(task)
        with lock:
            progress.finished(outcome)
        return outcome

    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        with sigterm_as_exception():
            return list(pool.map(one, tasks))
    except (KeyboardInterrupt, Terminated) as stop:
        signum = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
        pool.shutdown(wait=False, cancel_futures=True)
        _cancel()
        pool.shutdown(wait=True)
        _remove_partials(tasks)
        raise CaptureInterrupted(
            f"interrupted by {signal.Signals(signum).name} while decoding",
            phase="postprocess",
            exit_code=128 + signum,
        ) from None
    finally:
        pool.shutdown(wait=True)


_WORKERS: set[subprocess.Popen] = set()


def _cancel() -> None:
    """Kill every running decode worker (on an interrupt)."""
    for proc in list(_WORKERS):
        proc.kill()


def _remove_partials(tasks: list[Task]) -> None:
    """Temporary files of killed workers: half-written artifacts and launch parts."""
    for task in tasks:
        leftovers = [task.out_dir / f".{name}.tmp" for name in task.outputs()]
        leftovers += task.raw.parent.glob(f".part*.{task.raw.name}")
        leftovers += task.raw.parent.glob(f".part*.{task.raw.stem}.out")
        for path in leftovers:
            path.unlink(missing_ok=True)


def preload() -> None:
    """Import the decoder now (about 0.2 s), e.g. in a thread while the passes run."""
    _can_decode_inline()


def _can_decode_inline() -> bool:
    try:
        _decoder_class()
    except ImportError:
        return False
    return True


def _decoder_class():
    """``iket.RawCaptureDecoder``, importable even with libs-base alone (see toolchain)."""
    try:
        from iket import RawCaptureDecoder
    except ImportError:
        from .toolchain import own_distribution

        folder = own_distribution()[1]
        if not folder or folder in sys.path:
            raise
        sys.path.insert(0, folder)
        from iket import RawCaptureDecoder
    return RawCaptureDecoder


def decode_inline(task: Task) -> Outcome:
    """Decode one task in this process (its inputs already checked by :func:`_missing_input`)."""
    start = time.monotonic()
    try:
        written = _export(task)
    except Exception as error:  # the C++ decoder raises RuntimeError/ValueError variants
        return Outcome(task, time.monotonic() - start, error=f"{task.raw}: {error}")
    return Outcome(task, time.monotonic() - start, written=written)


def _missing_input(task: Task) -> str | None:
    """Why the raw capture cannot be decoded, checked cheaply before the decoder sees it.

    The C++ decoder aborts the whole process on a truncated ``iket.data.bin``, so the
    raw manifest's data references are checked against the files first.
    """
    for path in (task.raw, task.raw.parent / "iket.data.bin"):
        if not path.is_file():
            return f"{path} is missing"
    try:
        launches = json.loads(task.raw.read_bytes())["launches"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        return f"{task.raw} is not a raw capture manifest ({error.__class__.__name__})"
    sizes: dict[str, int] = {}
    for number, launch in enumerate(launches):
        ref = launch.get("dataRef") or {}
        if not launch.get("canDecode") or not ref.get("filename"):
            continue
        data = task.raw.parent / ref["filename"]
        if data.name not in sizes:
            sizes[data.name] = data.stat().st_size if data.is_file() else -1
        end = int(ref.get("offset", 0)) + int(ref.get("size", 0))
        if sizes[data.name] < 0:
            return f"{data} is missing"
        if end > sizes[data.name]:
            return f"{data} is truncated: launch {number} needs {end} bytes, it has {sizes[data.name]}"
    return None


def _decode_in_child(task: Task) -> Outcome:
    start = time.monotonic()
    spec = json.dumps(
        {
            "pid_hex": task.pid_hex,
            "raw": str(task.raw),
            "out_dir": str(task.out_dir),
            "export": task.export,
            "formats": list(task.formats),
        }
    )
    with subprocess.Popen(
        [sys.executable, "-m", "iket_cli.postprocess", spec],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    ) as proc:
        _WORKERS.add(proc)
        try:
            _, stderr = proc.communicate()
        finally:
            _WORKERS.discard(proc)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        last = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        if proc.returncode < 0:
            last = f"the decoder crashed (signal {-proc.returncode})"
        return Outcome(task, seconds, error=f"{task.raw}: {last}")
    return Outcome(task, seconds, written=task.outputs())


def _export(task: Task) -> list[str]:
    decoder_class = _decoder_class()
    if task.export == "json":
        out = task.out_dir / task.outputs()[0]
        tmp = out.with_name(f".{out.name}.tmp")
        if splitjson.export_json(task.raw, tmp, decoder_class):  # by launches: much faster
            os.replace(tmp, out)
            return [out.name]
    decoder = decoder_class(str(task.raw))
    try:
        if task.export == "json":
            text = decoder.export_decoded_json()
            decoder.close()
            return [_write_text(task.out_dir / task.outputs()[0], text)]
        trace = decoder.export_perfetto_trace()
    finally:
        decoder.close()
    return _write_perfetto(task, trace)


def _write_perfetto(task: Task, trace: bytes) -> list[str]:
    import gzip

    stem = f"iket_pid_{task.pid_hex}"
    written = []
    if "perfetto" in task.formats:
        written.append(_write_bytes(task.out_dir / f"{stem}.pftrace", trace))
    if "html" in task.formats:
        gz = gzip.compress(trace, compresslevel=GZIP_LEVEL, mtime=0)
        written.append(_write_bytes(task.out_dir / f"{stem}.pftrace.gz", gz))
    return written


def finish_html(
    capture_dir: Path, record: dict, formats: list[str], kept: frozenset[str] = frozenset()
) -> list[dict]:
    """Write each process's offline report, drop JSON traces made only for it (not those
    named in ``kept``, which were there before), and return the processes rescanned (their
    counts kept from ``record``, which had the JSON)."""
    from . import manifest as manifest_mod
    from . import report

    report.write_for_capture(capture_dir, record)
    if "json" not in formats:
        for process in record["processes"]:
            trace_json = process["artifacts"].get("trace_json")
            if trace_json and trace_json["path"] not in kept:
                (capture_dir / trace_json["path"]).unlink(missing_ok=True)
    return manifest_mod.rescan(capture_dir, record["processes"])


def _write_text(path: Path, text: str) -> str:
    """Write ``text`` as UTF-8 in slices (atomically), as run-iket's ``write_text`` would."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        splitjson.write_slices(handle, text)
    os.replace(tmp, path)
    return path.name


def _write_bytes(path: Path, data: bytes) -> str:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path.name


def _child_main(spec: str) -> int:
    """Entry point of a worker process: decode one task, report errors on stderr."""
    data = json.loads(spec)
    task = Task(
        data["pid_hex"], Path(data["raw"]), Path(data["out_dir"]), data["export"], tuple(data["formats"])
    )
    outcome = decode_inline(task)
    if outcome.error:
        sys.stderr.write(outcome.error + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))


def postprocess_capture(
    capture_dir: Path, formats: list[str], *, jobs: int | None = None, progress: Progress | None = None
) -> tuple[dict, list[Outcome]]:
    """Decode every kept raw capture in ``capture_dir`` and write or update its manifest.

    Works on a capture kept by ``iket profile --keep`` or by ``run-iket --keep``. Returns
    the manifest and each task's outcome; a task that failed is named in the manifest's
    ``error`` and leaves the other processes' artifacts in place.
    """
    from datetime import datetime, timezone

    from . import manifest as manifest_mod
    from .outdir import MANIFEST_NAME

    if not capture_dir.is_dir():
        raise UsageError(f"{capture_dir} is not a directory", hint="give a capture made with --keep")
    tasks = plan(capture_dir, formats)
    if not tasks:
        raise UsageError(
            f"{capture_dir} holds no raw capture (no iket/pid_*/iket.data.json)",
            hint="capture with iket profile --keep (or run-iket --keep) to decode later",
        )
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    had_json = frozenset(p.name for p in capture_dir.glob("iket_pid_*.trace.json"))
    outcomes = run(tasks, jobs=jobs, progress=progress)
    seconds = round(time.monotonic() - t0, 3)
    if (capture_dir / MANIFEST_NAME).is_file():
        record = manifest_mod.read(capture_dir)
    else:
        record = _new_manifest(capture_dir, started)
    failures = [o for o in outcomes if o.error]
    record["processes"] = manifest_mod.scan_processes(capture_dir)
    if "html" in formats:
        record["processes"] = finish_html(capture_dir, record, formats, had_json)
        seconds = round(time.monotonic() - t0, 3)
    record["postprocess"] = [f for f in FORMATS if f in set(record["postprocess"]) | set(formats)]
    record["phases"] = {**record["phases"], "postprocess": seconds}
    record["status"] = "failed" if failures else record["status"]
    record["error"] = (
        {
            "type": "PostprocessError",
            "message": "; ".join(dict.fromkeys(o.error for o in failures)),
            "phase": "postprocess",
            "exit_code": 1,
        }
        if failures
        else record["error"]
    )
    manifest_mod.write(capture_dir, record)
    return record, outcomes


def _new_manifest(capture_dir: Path, started) -> dict:
    """A manifest for a folder that raw run-iket made: what can be known after the fact."""
    import platform

    from . import manifest as manifest_mod
    from ._version import __version__
    from .toolchain import own_distribution

    now = started.isoformat(timespec="milliseconds")
    return {
        "schema_version": manifest_mod.SCHEMA_VERSION,
        "status": "ok",
        "error": None,
        "target": {"kind": "unknown", "spec": "", "args": [], "display": "(captured by run-iket)"},
        "command": None,
        "argv": [],
        "run_iket_argv": [],
        "cwd": str(capture_dir.resolve()),
        "started_at": now,
        "finished_at": now,
        "duration_s": 0.0,
        "phases": manifest_mod.phases_from_stats(capture_dir / "run-iket.stats.json"),
        "versions": {
            "iket_cli": __version__,
            "run_iket": own_distribution()[0],
            "python": platform.python_version(),
            "gpus": [],
        },
        "postprocess": [],
        "keep": True,
        "log": manifest_mod.LOG_NAME,
        "processes": [],
    }
