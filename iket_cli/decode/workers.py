"""The worker processes of one decode: one per task, or long-lived ones that take chunk after
chunk, so that an interrupt stops exactly them.

A worker is ``python -m iket_cli.decode.worker``, in a session of its own (a Ctrl-C at the
terminal reaches the CLI, which stops the workers) and dying with the CLI. A launch split by
CTAs (:mod:`.ctasplit`) is decoded by workers that stay: a fresh process's first export
faults in its memory page by page, and on a VM two 1.4 GB exports side by side spent more
time in those faults than in decoding (keep256, 2-core machine: 8 s against 4.5 s for the
same launches in quarters, each worker reusing its pages: its allocator told to keep freed
memory, :data:`KEEP_FREED`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from ..capture import spawn
from .tasks import DISK_FULL, Outcome, Task

#: glibc's allocator in a long-lived worker: large blocks from the heap, not fresh mappings,
#: and freed memory kept for the next chunk (its pages already faulted in).
KEEP_FREED = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184"


class Workers:
    """The worker processes of one decode."""

    def __init__(self) -> None:
        self.cancelled = False
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()

    def cancel(self) -> None:
        """Kill every running worker; what they were doing is reported as cancelled."""
        with self._lock:
            self.cancelled = True
            for proc in self._running:
                proc.kill()

    def _start(self, argv: list[str], **options) -> subprocess.Popen | None:
        with self._lock:
            if self.cancelled:
                return None
            proc = spawn.start(
                [sys.executable, "-m", "iket_cli.decode.worker", *argv], new_session=True, **options
            )
            self._running.add(proc)
            return proc

    def _ended(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._running.discard(proc)

    def decode(self, task: Task) -> Outcome:
        """One task in a worker process of its own."""
        start = time.monotonic()
        spec = json.dumps({**task.to_dict(), "parent": os.getpid()})
        proc = self._start([spec], stdout=spawn.DEVNULL, stderr=spawn.PIPE, text=True)
        if proc is None:
            return Outcome(task, 0.0, cancelled=True)
        try:
            with proc:
                _, stderr = proc.communicate()
        finally:
            self._ended(proc)
        seconds = time.monotonic() - start
        if self.cancelled:
            return Outcome(task, seconds, cancelled=True)
        if proc.returncode == 0:
            return Outcome(task, seconds, written=task.outputs())
        return _failed(task, seconds, proc.returncode, stderr)

    def server(self) -> Server:
        """A worker that stays, for one task after another (:meth:`Server.decode`)."""
        return Server(self)


class Server:
    """A long-lived worker: it decodes the tasks (:meth:`decode`) and writes the stitch jobs
    (:meth:`pieces`) it is sent one after another, reusing its memory, and answers one line
    each; started on first use, stopped by :meth:`close`."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.proc: subprocess.Popen | None = None
        #: The worker's stderr (a file: a pipe nobody reads could fill and stall it).
        self.errors = None
        #: How the last worker ended (for the error of a task it died on).
        self.returncode: int | None = None
        self.stderr = ""

    def decode(self, task: Task) -> Outcome:
        start = time.monotonic()
        told = self._ask(task.to_dict())
        seconds = time.monotonic() - start
        if self.workers.cancelled:
            return Outcome(task, seconds, cancelled=True)
        if told is None:  # the worker died: the decoder aborted on this task
            return _failed(task, seconds, self.returncode, self.stderr)
        if told.get("error"):
            return Outcome(task, seconds, error=f"{task.raw}: {told['error']}", errno=told.get("errno"))
        return Outcome(task, seconds, written=task.outputs())

    def pieces(self, job: dict) -> dict | None:
        """Write one job of a launch's stitch (:func:`.ctapieces.write`); the worker's answer
        (``error``, ``errno``), or None when it died or could not start."""
        return self._ask({"pieces": job})

    def _ask(self, request: dict) -> dict | None:
        """Send one request (starting the worker on first use); its answer, or None."""
        if self.proc is None:
            env = dict(os.environ)
            env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), KEEP_FREED]))
            self.errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by close()
            self.proc = self.workers._start(
                ["--serve", str(os.getpid())],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.errors,
                text=True,
            )
            if self.proc is None:
                self.errors.close()
                return None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        except OSError:
            answer = ""
        if not answer:
            self.close()
            return None
        return json.loads(answer)

    def close(self) -> None:
        """Let the worker end (its input closed) and wait for it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        self.returncode = proc.wait()
        self.errors.seek(0)
        self.stderr = self.errors.read()
        self.errors.close()
        proc.stdout.close()
        self.workers._ended(proc)


def _failed(task: Task, seconds: float, returncode: int | None, stderr: str) -> Outcome:
    """How ``task`` ended in a worker that exited with ``returncode`` (its last error line)."""
    last = (stderr.strip().splitlines() or [f"exit status {returncode}"])[-1]
    if returncode is not None and returncode < 0:
        last = f"the decoder crashed (signal {-returncode})"
    code = returncode if returncode in DISK_FULL else None
    return Outcome(task, seconds, error=f"{task.raw}: {last}", errno=code)
