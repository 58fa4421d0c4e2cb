"""``iket profile --window`` and ``--one-pass``, inside the workload: NVIDIA's in-process
session around FUNC's chosen calls, or around the whole process. No run-iket.

The start-up hook (``sitecustomize``) calls :func:`install` when ``IKET_CLI_WINDOW`` holds a
JSON spec. ``--window``: FUNC is wrapped as ``--extract`` wraps it (``iket_extract.wrap_when_loaded``);
the session starts as the first chosen call begins and stops as the last one ends (calls
``A-B``: one window from the start of A to the end of B), its trace saved into the spec's
folder, then the process ends unless ``stop`` is false. ``--one-pass``: the session starts
here, before any of the user's code, and stops at the process's exit: one trace per Python
process, as run-iket's. Each step is written to the folder's ``window.json`` as it happens,
so the CLI knows what ran in the window should the process die inside it.

The binding is iket's own (``iket_cli.capture.in_process.session``: ctypes, nothing heavy); the folder
that holds the ``iket_cli`` package is in the spec.
"""

import json
import os
import sys
import threading
import time
from pathlib import Path

from iket_extract import _claim, _stop, wrap_when_loaded
from iket_saved import WINDOW_SPEC_ENV as SPEC_ENV
from iket_saved import WINDOW_STATE as STATE
from iket_saved import write_json


class Windower:
    """Counts FUNC's calls (``--window``) and holds the session around the chosen ones. FUNC may
    be called from several threads: the claim, the count and the session's opening and closing
    are one step each (a lock), so no call is lost and the window opens and closes once."""

    def __init__(self, spec):
        self.spec = spec
        self.calls = spec.get("calls") or []
        self.seen = 0
        self.owner = None
        self.session = None
        self.started = time.monotonic()
        self.lock = threading.RLock()
        self.state = {"pid": os.getpid(), "function": spec.get("function"), "seen": 0, "open": None,
                      "closed": None, "trace": None, "window_s": None, "error": None}  # fmt: skip

    def call(self, func, args, kwargs):
        with self.lock:
            if self.owner is None:
                self.owner = _claim(self.spec)
            number = self._count() if self.owner else None
        if number is None:
            return func(*args, **kwargs)
        failed = True
        try:
            result = func(*args, **kwargs)
            failed = False
            return result
        finally:
            self._after(number, failed)

    def _count(self):
        """This call's number; the window opened where it is the first chosen one."""
        self.seen += 1
        self.state["seen"] = self.seen
        if self.calls and self.seen == self.calls[0]:
            self.open(self.seen)
        return self.seen

    def _after(self, number, failed):
        """After call ``number``: the window closed where it was the last chosen one (or a chosen
        one raised); the run ended once the window is saved, unless asked to go on."""
        with self.lock:
            inside = bool(self.calls) and self.calls[0] <= number <= self.calls[-1]
            if self.session is None or not inside or not (number == self.calls[-1] or failed):
                return
            self.close(number, failed)
        if not failed and self.spec.get("stop", True):
            _stop()

    def open(self, number):
        from iket_cli.capture.in_process import live, session

        live.synchronize()
        try:
            lib = session.load(Path(self.spec["library"]))
            given = dict(self.spec["settings"])
            given["cluster"] = tuple(given["cluster"]) if given.get("cluster") else None
            settings = session.Settings(**given)
            self.session = session.Session(lib, settings, key=self.spec["library"]).start()
        except Exception as error:  # no library, or it refused: the CLI says so, the run ends here
            self.refused(error)
        self.started = time.monotonic()
        self.state["open"] = number
        self.write()

    def refused(self, error):
        self.state["refused"] = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
        self.write()
        _stop(3)

    def close(self, number, failed=False):
        from iket_cli.capture.in_process import live

        trace = os.path.join(self.spec["dir"], f"iket_pid_{os.getpid():#x}.trace.json")
        try:
            if not failed:
                live.synchronize()
        finally:
            self.state["window_s"] = round(time.monotonic() - self.started, 3)
            with live.signals_held():  # a second Ctrl-C waits: the trace is saved first
                self._save(trace, number, failed)

    def _save(self, trace, number, failed):
        """Stop, save, close; what happened written to the folder's state. A refused Stop or
        SaveTrace ends the run (the CLI says so); a refused close after the trace was saved is
        said in the state and the run goes on: the user's code never sees the session's error."""
        session, self.session = self.session, None
        failure = None
        try:
            session.stop()
            session.save(trace)
            self.state["trace"] = os.path.basename(trace)
        except Exception as error:
            failure = error
        try:
            session.close()
        except Exception as error:
            self.state["closing"] = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
        self.state["closed"] = number
        self.state["error"] = "the call raised" if failed else None
        if failure is not None:
            self.refused(failure)
        self.write()

    def write(self):
        """The window's state in its folder; where it cannot be written (a full disk), said on
        stderr for the run's log, and the run goes on (the CLI judges the folder's disk)."""
        try:
            write_json(os.path.join(self.spec["dir"], STATE), self.state)
        except OSError as error:
            sys.stderr.write(f"iket: the window's state could not be written: {error}\n")

    def at_exit(self):
        with self.lock:
            if self.session is not None:  # --one-pass, or a window its run ended inside
                self.close(self.seen)
            elif self.owner:
                self.write()


def install():
    """Set up this process's window (called by the start-up hook)."""
    spec = json.loads(os.environ[SPEC_ENV])
    sys.path.append(spec["iket_root"])
    from iket_cli.capture.in_process import live

    live.prepare()
    windower = Windower(spec)
    _at_exit_first(windower.at_exit)
    if spec.get("one_pass"):
        if _claim_process(spec):
            windower.owner = True
            windower.open(0)
        return
    wrap_when_loaded(spec, windower)


def _at_exit_first(callback):
    """Run ``callback`` as the interpreter ends, before the ``atexit`` handlers of the libraries
    the workload imported (they run last-registered first, and this hook registers before any
    of them): a library that unloads its CUDA modules at exit must find the session stopped.
    ``threading``'s exit callbacks run before ``atexit``'s; where they are missing, ``atexit``."""
    import threading

    try:
        threading._register_atexit(callback)
    except (AttributeError, RuntimeError):
        import atexit

        atexit.register(callback)


def _claim_process(spec):
    """``--one-pass``: every Python process of the workload has its own window, in a folder
    of its own (one trace each, as run-iket's)."""
    spec["dir"] = os.path.join(spec["dir"], f"pid_{os.getpid():#x}")
    os.makedirs(spec["dir"], exist_ok=True)
    return True
