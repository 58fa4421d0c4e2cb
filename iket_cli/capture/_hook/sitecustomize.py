"""iket's start-up hook: one line per Python process of a capture, naming what it was.

iket puts this folder first on the passes' ``PYTHONPATH``, so every Python process of
the workload (torchrun's ranks, spawned workers) runs it at start-up, before any user
code. It writes one JSON line — pid, parent pid, command line, hostname, the rank and
device variables of torchrun, MPI and Slurm — to the file named by ``IKET_CLI_PROCS``,
and at exit one more line with the CUDA device the process used, if it had already
imported torch (nothing heavy is ever imported here). Where the process compiles CuTe DSL
kernels, it also writes each event name's payload type as the kernel is traced (one line per
distinct op, name and type): IKET keeps one payload type per name and reads every value with
it, so a name given an Int32 in one place and a Float32 in another comes back misread, and
only the compile can tell. In ``--extract``'s record run it also wraps the function whose
calls are recorded (``iket_extract.py``); with ``--window`` or ``--one-pass`` it opens the
in-process session (``iket_window.py``). Then it hands over to the next ``sitecustomize`` on the path, if the
environment has one. It must never break the workload: every failure is swallowed.
"""

import os
import sys

_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "CUDA_VISIBLE_DEVICES",
)


def _write(record):
    import json

    line = (json.dumps(record) + "\n").encode()
    fd = os.open(os.environ["IKET_CLI_PROCS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one small O_APPEND write: lines of concurrent processes never mix
    finally:
        os.close(fd)


def record_start(argv=None, ppid=None):
    """Write this process's start line; iket's warm worker calls it again with the pass
    process it stands in for (its command line and its pid as the parent)."""
    import socket

    config = os.environ.get("IKET_INJECTION_CONFIG", "")
    record = {
        "event": "start",
        "pid": os.getpid(),
        "ppid": os.getppid() if ppid is None else ppid,
        "argv": list(getattr(sys, "orig_argv", sys.argv)) if argv is None else argv,
        "hostname": socket.gethostname(),
        "pass": "tracker" if "tracker" in config else ("capture" if config else None),
        "env": {name: os.environ[name] for name in _VARS if name in os.environ},
    }
    _write(record)


def _device():
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    index = torch.cuda.current_device()
    _write(
        {
            "event": "device",
            "pid": os.getpid(),
            "cuda_device": index,
            "gpu": torch.cuda.get_device_name(index),
        }
    )


#: CuTe DSL's IKET dialect ops: ``cutlass.cute.experimental.iket`` calls them by attribute at
#: trace time, below the frame that gives an op its source location (which stays the user's).
_DIALECT = "cutlass._mlir.dialects.iket"
_OPS = ("mark", "range_push", "range_start", "range_end")


def _wrap(module):
    seen = set()

    def note(op, args, kwargs):
        if op == "range_end":
            name = kwargs.get("event_name")  # given where the token knows its name
        else:
            name = kwargs.get("event_name", args[1] if op == "range_start" else args[0])
        payload = kwargs.get("payload")
        kind = None if payload is None else str(payload.type)
        key = (op, str(getattr(name, "value", name)), kind)
        if name is not None and key not in seen:
            seen.add(key)
            _write({"event": "payload", "pid": os.getpid(), "op": op, "name": key[1], "type": kind})

    def wrapped(op, original):
        def call(*args, **kwargs):
            _safe(lambda: note(op, args, kwargs))
            return original(*args, **kwargs)

        call.__wrapped__ = original
        return call

    for op in _OPS:
        original = getattr(module, op, None)
        if callable(original):
            setattr(module, op, wrapped(op, original))


def _chain():
    """Run the sitecustomize this one shadows, if there is one."""
    import importlib

    here = os.path.dirname(os.path.abspath(__file__))
    saved_path, saved = list(sys.path), sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved_path
        if saved is not None:
            sys.modules["sitecustomize"] = saved


def _safe(function):
    try:  # noqa: SIM105  (contextlib would be one more import in every process)
        function()
    except Exception:
        pass


def _install():
    from iket_imports import after_import

    record_start()
    after_import({_DIALECT}, lambda module: _safe(lambda: _wrap(module)), once=True)
    import atexit

    atexit.register(_safe, _device)


def _extract():
    """``--extract``'s record run: wrap FUNC (see iket_extract.py). Not swallowed: a failure
    here would leave the record run without its recording, which the CLI must hear of."""
    import iket_extract

    iket_extract.install()


if os.environ.get("IKET_CLI_PROCS"):
    _safe(_install)
if os.environ.get("IKET_CLI_EXTRACT"):
    _extract()
if os.environ.get("IKET_CLI_WINDOW"):  # --window, --one-pass: not swallowed either
    import iket_window

    iket_window.install()
_safe(_chain)
