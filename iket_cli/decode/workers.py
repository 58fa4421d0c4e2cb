"""The worker processes of one decode: one per task, or long-lived ones that take chunk after
chunk, so that an interrupt stops exactly them. No decode runs in the CLI's own process:
NVIDIA's decoder aborts its process on some corrupt captures (SIGABRT), which must end that
decode with a message, not the CLI.

A worker is ``python -m iket_cli.decode.worker_main``, in a session of its own (a Ctrl-C at the
terminal reaches the CLI, which stops the workers) and dying with the CLI. A small task is
decoded in a fork of the CLI instead (:meth:`Workers.forked`): the decoder is already
imported there, so the fork costs milliseconds where a fresh interpreter costs a quarter of
a second. A launch split by
CTAs (:mod:`.split.chunks`) is decoded by workers that stay: a fresh process's first export
faults in its memory page by page, and on a VM two big exports side by side spent more time
in those faults than in decoding; a worker that stays reuses its pages (its allocator told
to keep freed memory, :data:`.prestart.KEEP_FREED`; docs/history/benchmarks.md, "A big launch
decoded by CTAs").
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import warnings

from ..system import spawn
from ..system.filesystem import DISK_FULL
from ..system.tree import die_with_parent
from .decoder import decode
from .prestart import Prestarted, let_go, serving, worker
from .tasks import Kept, Outcome, Task


class Workers:
    """The worker processes of one decode (``prestarted``: long-lived ones started ahead)."""

    def __init__(self, prestarted: Prestarted | None = None) -> None:
        self.cancelled = False
        self.prestarted = prestarted
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self._forks: set[int] = set()

    def cancel(self) -> None:
        """Kill every running worker; what they were doing is reported as cancelled."""
        with self._lock:
            self.cancelled = True
            for proc in self._running:
                proc.kill()
            for pid in self._forks:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def forked(self, task: Task) -> Outcome:
        """One task in a fork of this process, which already holds the decoder; a decoder that
        aborts ends the fork alone ("the decoder crashed (signal 6)"), never the CLI."""
        start = time.monotonic()
        reader, writer = os.pipe()
        with self._lock:
            if self.cancelled:
                os.close(reader)
                os.close(writer)
                return Outcome(task, 0.0, cancelled=True)
            with warnings.catch_warnings():  # Python 3.12 warns of fork() beside threads: the
                warnings.simplefilter("ignore", DeprecationWarning)  # child runs no other thread
                pid = os.fork()
            if pid == 0:
                _decode_in_fork(task, reader, writer)  # never returns
            self._forks.add(pid)
        os.close(writer)
        with os.fdopen(reader, "rb") as answers:
            answer = answers.read()
        _, status = os.waitpid(pid, 0)
        with self._lock:
            self._forks.discard(pid)
        seconds = time.monotonic() - start
        if self.cancelled:
            return Outcome(task, seconds, cancelled=True)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 or not answer:
            return _failed(task, seconds, code, "")
        told = json.loads(answer)
        return Outcome(task, seconds, error=told["error"], written=told["written"], errno=told["errno"])

    def _start(self, argv: list[str], **options) -> subprocess.Popen | None:
        with self._lock:
            if self.cancelled:
                return None
            proc = worker(argv, **options)
            self._running.add(proc)
            return proc

    def _adopt(self, proc: subprocess.Popen) -> bool:
        """Run a prestarted worker as one of these (False, and it is killed, once cancelled)."""
        with self._lock:
            if self.cancelled:
                proc.kill()
                return False
            self._running.add(proc)
            return True

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
        """A worker that stays, for one task after another (:meth:`Server.decode`): a
        prestarted one if any is left."""
        server = Server(self)
        taken = self.prestarted.take() if self.prestarted is not None else None
        if taken is not None and self._adopt(taken[0]):
            server.proc, server.errors = taken
        elif taken is not None:
            let_go(*taken)
        return server


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
        failed = self._failed(task, seconds, told)
        if failed is not None:
            return failed
        described = told.get("described")  # a part it keeps for its move
        kept = Kept(described, self) if described else None
        return Outcome(task, seconds, written=task.outputs(), split=kept)

    def pieces(self, job: dict) -> dict | None:
        """Write one job of a split export (a launch's stitch, or the move of a part it keeps
        or one spooled: :func:`.split.run_job`); the worker's answer (``error``, ``errno``),
        or None when it died or could not start."""
        return self._ask({"pieces": job})

    def spool(self, outcome: Outcome) -> Outcome:
        """Have the worker spool the part it keeps for ``outcome`` to its files and let it go
        (its move then any worker's); the outcome of the part so spooled."""
        task = outcome.task
        told = self._ask({"spool": str(task.out_dir / task.outputs()[0]), "export": task.export})
        failed = self._failed(task, outcome.seconds, told)
        if failed is not None:
            return failed
        return dataclasses.replace(outcome, split=dataclasses.replace(outcome.split, holder=None))

    def _failed(self, task: Task, seconds: float, told: dict | None) -> Outcome | None:
        """How ``task`` ended if the worker's answer ``told`` says it did not end well."""
        if self.workers.cancelled:
            return Outcome(task, seconds, cancelled=True)
        if told is None:  # the worker died: the decoder aborted on this task
            return _failed(task, seconds, self.returncode, self.stderr)
        if told.get("error"):
            return Outcome(task, seconds, error=f"{task.raw}: {told['error']}", errno=told.get("errno"))
        return None

    def _ask(self, request: dict) -> dict | None:
        """Send one request (starting the worker on first use); its answer, or None."""
        if self.proc is None:
            self.errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by close()
            argv, options = serving(self.errors)
            self.proc = self.workers._start(argv, **options)
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


def _decode_in_fork(task: Task, reader: int, writer: int) -> None:
    """The fork's whole life: the decode, its outcome as one JSON document on ``writer``,
    then ``os._exit`` (no exit handlers, no buffers of the CLI's flushed twice)."""
    code = 70  # EX_SOFTWARE: the fork failed before it could answer
    try:
        os.close(reader)
        os.setsid()  # a Ctrl-C at the terminal reaches the CLI, which stops the fork
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        die_with_parent(os.getppid())
        faulthandler.disable()  # a decoder abort is said in one line by the CLI, not dumped
        outcome = decode(task)
        answer = {"error": outcome.error, "written": outcome.written, "errno": outcome.errno}
        os.write(writer, json.dumps(answer).encode())
        code = 0
    finally:
        os._exit(code)


def _failed(task: Task, seconds: float, returncode: int | None, stderr: str) -> Outcome:
    """How ``task`` ended in a worker that exited with ``returncode`` (its last error line)."""
    last = (stderr.strip().splitlines() or [f"exit status {returncode}"])[-1]
    if returncode == -signal.SIGKILL:  # never the decoder's own doing: the OOM killer, or a user
        last = (
            "a decode worker was killed (signal 9, SIGKILL: out of memory?) while decoding it; the raw "
            "capture is kept: decode it again with fewer workers (iket postprocess DIR --jobs 1)"
        )
    elif returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else "?"
        last = (
            f"NVIDIA's decoder crashed (signal {-returncode}, {name}) reading it: the raw capture is "
            "corrupt or of a version it does not know; it is kept as it is"
        )
    code = returncode if returncode in DISK_FULL else None
    return Outcome(task, seconds, error=f"{task.raw}: {last}", errno=code)
