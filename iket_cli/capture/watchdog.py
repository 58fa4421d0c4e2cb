"""A small process that outlives the CLI: if the CLI dies without a word, it cleans up.

``kill -9``, the OOM killer or a scheduler's preemption end the CLI with no chance to
stop its children: run-iket, the shim and the workload would keep running (and keep the
GPU), and the staging folder (which can hold gigabytes of raw capture) would stay. So
each capture starts a watchdog, ``python -m iket_cli.capture.watchdog``, in a session of
its own (a Ctrl-C at the terminal does not reach it), reading a pipe from the CLI:

* at the start the CLI sends one JSON line: the capture's token, its staging folder, its
  output directory, paths to remove, and the manifest to keep as evidence;
* at the end it sends ``done``, and the watchdog exits;
* if the pipe ends without ``done`` (the kernel closes it when the CLI dies), the watchdog
  kills every process of the capture (:func:`~iket_cli.system.tree.kill_capture`: found
  by their environment's marker wherever they were re-parented, or by the pids the CLI
  recorded in the staging folder), removes the paths, and,
  holding DIR's lock, keeps the log and the evidence manifest in ``DIR.failed/`` and
  removes the rest of the staging folder, the lock file last.

A parent-death signal on run-iket (``PR_SET_PDEATHSIG``) would stop run-iket alone, not
its children, and would need an exec wrapper on every capture's path; the watchdog
stops all of them, found by their marker, so it does the whole job.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from pathlib import Path
from typing import IO, Any

from ..errors import IketError
from ..model import manifest as manifest_mod
from ..system import spawn, tree
from .outdir import Lock
from .staging import OWNER_NAME, PIDS_NAME, Staging

DONE = "done"


class Watchdog:
    """The CLI's side: start it, then say ``done`` when the capture ended normally."""

    def __init__(
        self,
        staging: Staging | None,
        *,
        token: str | None = None,
        remove: list[Path] | None = None,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        """``staging``: a capture's; None for processes marked with ``token`` alone (the probes
        of ``iket doctor --gpu``), whose paths to ``remove`` are all there is to clean."""
        self.orders = {
            "token": staging.token if staging is not None else token,
            "output_dir": str(staging.output_dir) if staging is not None else None,
            "staging": str(staging.root) if staging is not None else None,
            "remove": [str(p) for p in remove or []],
            "evidence": evidence,
        }
        self._proc: Any = None

    def __enter__(self) -> Watchdog:
        try:
            self._proc = spawn.start(
                [sys.executable, "-m", __name__],
                stdin=spawn.PIPE,
                stdout=spawn.DEVNULL,
                stderr=spawn.DEVNULL,
                new_session=True,
            )
            self._send(json.dumps(self.orders))
        except (IketError, OSError):
            self._proc = None  # no watchdog: the capture still runs, unguarded against kill -9
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        with contextlib.suppress(OSError):
            self._send(DONE)
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        with contextlib.suppress(spawn.TimeoutExpired):
            self._proc.wait(timeout=5)

    def _send(self, line: str) -> None:
        self._proc.stdin.write(line.encode() + b"\n")
        self._proc.stdin.flush()


def watch(orders_in: IO[bytes]) -> int:
    """The watchdog's loop: read orders until ``done`` (exit) or the end of the pipe (clean up)."""
    orders: dict[str, Any] | None = None
    for raw in orders_in:
        line = raw.decode("utf-8", "replace").strip()
        if line == DONE:
            return 0
        if orders is None and line:
            orders = json.loads(line)
    if orders is not None:
        clean_up(orders)
    return 0


def clean_up(orders: dict[str, Any]) -> None:
    """Everything the dead CLI would have done on its way out."""
    staged = orders.get("staging")
    tree.kill_capture(orders["token"], tree.recorded(Path(staged) / PIDS_NAME) if staged else [])
    for path in orders.get("remove", []):
        shutil.rmtree(path, ignore_errors=True)
    if staged is None:
        return
    output_dir, root = Path(orders["output_dir"]), Path(orders["staging"])
    try:
        lock = Lock(output_dir).acquire()
    except IketError:
        return  # another capture into DIR holds it now: it removes stale staging itself
    try:
        if root.is_dir():
            keep_evidence(Staging(output_dir, root, orders["token"]), orders.get("evidence"))
    finally:
        lock.release()


def keep_evidence(staging: Staging, evidence: dict[str, Any] | None) -> None:
    """The log and the evidence manifest into ``DIR.failed/``; the raw capture is dropped."""
    with contextlib.suppress(OSError):
        (staging.root / OWNER_NAME).unlink()
    capture = staging.finalize()
    for entry in capture.iterdir():
        if entry.suffix != ".log":
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    try:
        if evidence is not None:
            manifest_mod.write(capture, evidence)
        staging.fail()
    except (OSError, IketError):
        pass
    staging.discard()


if __name__ == "__main__":
    sys.exit(watch(sys.stdin.buffer))
