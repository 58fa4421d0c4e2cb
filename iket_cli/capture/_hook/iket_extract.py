"""``iket profile --extract``, inside the workload: record one function's calls, replay them.

Record: the start-up hook (``sitecustomize``) calls :func:`install` when ``IKET_CLI_EXTRACT``
holds a JSON spec. FUNC is wrapped in its module (or class) the moment that module has run,
so every caller gets the wrapper, whatever name it imported FUNC under and whenever. The
chosen calls have their arguments saved *before* FUNC runs (a kernel writing into an
argument must not change the saved inputs) and its result after. Once the last chosen call
is saved the process ends (the CLI stops the rest of the tree), unless ``stop`` is false.

Replay: :func:`replay` is the function target of the capture passes. It imports FUNC's
module without running a script's ``__main__``, loads the saved arguments onto their
devices and calls the original FUNC once per saved call, then compares the results.

The saved format is ``iket_saved.py``'s; TIRx kernels run outside run-iket by ``iket_tirx.py``.

This file runs in the user's interpreter (any Python 3 of ``--python``) and imports
nothing heavy itself: torch and numpy are used only when the workload already did.
"""

import contextlib
import functools
import inspect
import json
import os
import sys
from os.path import join as _join
from shutil import rmtree as _rmtree

from iket_imports import after_import
from iket_saved import (
    INDEX,
    OWNER,
    SPEC_ENV,
    UNSAVEABLE,
    VERSION,
    DiskFull,
    OverLimit,
    Unsaveable,
    write_json,
)
from iket_store import describe, probe, save
from iket_tirx import TIRX_IKET, plain

#: The rank variables of torchrun, MPI and Slurm, in the order they are believed.
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")

# -- recording ------------------------------------------------------------------------


class Recorder:
    """Counts FUNC's calls in this process and saves the chosen ones."""

    def __init__(self, spec):
        self.spec = spec
        self.folder = spec["dir"]
        self.calls = spec["calls"]  # a list of 1-based call numbers, or "last"
        self.seen = 0
        self.saved = []
        self.owner = None  # None: not decided yet; True/False once FUNC is first called
        self.used = 0  # bytes written so far

    def call(self, func, args, kwargs):
        if not self._owns():
            return func(*args, **kwargs)
        self.seen += 1
        number = self.seen
        if not self._chosen(number):
            self.write_index()  # how many calls were seen, should the chosen one never come
            return func(*args, **kwargs)
        slot = "call-last" if self.calls == "last" else f"call-{number}"
        folder = _join(self.folder, slot)
        _rmtree(folder, ignore_errors=True)  # ``last``: the previous call's
        self.saved = [c for c in self.saved if c["folder"] != slot]
        self.write_index()  # the call being saved is listed only once it is whole
        self.used = before = sum(c["bytes"] for c in self.saved)
        record = {"call": number, "folder": slot, "bytes": 0, "arguments": [], "parts": {}}
        try:
            record["arguments"], record["parts"]["inputs"] = _save_arguments(self, folder, args, kwargs)
        except (OverLimit, Unsaveable, DiskFull) as error:
            self.fail(error)
        result = func(*args, **kwargs)
        try:
            record["parts"]["result"] = save(self, folder, "result", result, "the result")
        except (OverLimit, Unsaveable, DiskFull) as error:
            self.fail(error)
        record["bytes"] = self.used - before
        record["result"] = describe(result)
        self.saved.append(record)
        self.write_index()
        if self.calls != "last" and number >= max(self.calls) and self.spec.get("stop", True):
            self.write_index(complete=True)
            _stop()
        return result

    def _chosen(self, number):
        return self.calls == "last" or number in self.calls

    def _owns(self):
        if self.owner is None:
            self.owner = _claim(self.spec)
        return self.owner

    def fail(self, error):
        """Stop the process: nothing saved stays, the index says why."""
        for name in os.listdir(self.folder):
            if name.startswith("call-"):
                _rmtree(_join(self.folder, name), ignore_errors=True)
        self.saved = []
        kind = {OverLimit: "over", DiskFull: "disk"}.get(type(error), "unsaveable")
        with contextlib.suppress(OSError):  # a full disk: the calls' removal made room, or not
            self.write_index(error={"kind": kind, "message": str(error)})
        _stop(UNSAVEABLE if kind == "unsaveable" else 1)

    def write_index(self, complete=False, error=None):
        index = {
            "version": VERSION,
            "function": self.spec["function"],
            "module": self.spec["module"],
            "qualname": self.spec["qualname"],
            "path0": self.spec.get("path0"),
            "pid": os.getpid(),
            "rank": _rank(),
            "seen": self.seen,
            "calls": self.saved,
            "complete": complete or (self.calls != "last" and len(self.saved) == len(self.calls)),
            "error": error,
        }
        write_json(_join(self.folder, INDEX), index)

    def at_exit(self):
        """The last word of a process that ran to its end (``last``, ``--no-stop-after``)."""
        if self.owner:
            chosen = 1 if self.calls == "last" else len(self.calls)
            self.write_index(complete=len(self.saved) == chosen)


def _claim(spec):
    """Whether this process records: the chosen rank, else the first process to call FUNC."""
    rank = _rank()
    if rank is not None and rank != spec.get("rank", 0):
        return False
    try:
        fd = os.open(_join(spec["dir"], OWNER), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def _rank():
    for name in RANK_VARS:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _stop(code=0):
    """End this process now: the saved calls are complete; what follows is not wanted."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _save_arguments(recorder, folder, args, kwargs):
    """Save the arguments (each named in an error); their summaries and the part's record."""
    names = _names(recorder.spec, len(args))
    for index, value in enumerate(args):  # first, one by one: an error names the argument
        probe(value, f"argument {index + 1} ({names[index]})")
    for key, value in kwargs.items():
        probe(value, f"argument {key}")
    part = save(recorder, folder, "inputs", (tuple(args), dict(kwargs)), "the arguments")
    summary = [dict(describe(v), name=names[i]) for i, v in enumerate(args)]
    return summary + [dict(describe(v), name=k) for k, v in kwargs.items()], part


def _names(spec, count):
    known = list(spec.get("parameters") or [])  # set by wrap()
    return [known[i] if i < len(known) else f"arg{i + 1}" for i in range(count)]


# -- where FUNC is wrapped ----------------------------------------------------------------


def wrap(owner, qualname, recorder):
    """Replace FUNC (``func`` or ``Class.method``) in ``owner`` by a recording wrapper."""
    *classes, name = qualname.split(".")
    for part in classes:
        owner = getattr(owner, part)
    raw = owner.__dict__[name] if classes else getattr(owner, name)
    if isinstance(raw, (property, type)) or not callable(getattr(raw, "__func__", raw)):
        return  # not a function: never wrapped, the CLI says it was never called
    kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
    func = raw.__func__ if kind else raw
    if getattr(func, "__iket_extract__", False):
        return
    recorder.spec["parameters"] = _parameters(func)

    def recorded(*args, **kwargs):
        return recorder.call(func, args, kwargs)

    recorded = functools.wraps(func)(recorded)
    recorded.__iket_extract__ = True
    setattr(owner, name, kind(recorded) if kind else recorded)


def _parameters(func):
    """FUNC's positional parameter names, to name the saved arguments."""
    try:
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return [p.name for p in inspect.signature(func).parameters.values() if p.kind in kinds]
    except (TypeError, ValueError):
        return []


def _module_matches(module, spec):
    target = spec["module"]
    if not target.endswith(".py"):
        return True
    try:
        return os.path.samefile(getattr(module, "__file__", "") or "", target)
    except OSError:
        return False


def wrap_when_loaded(spec, recorder):
    """Wrap FUNC (``spec``'s module and qualname) for ``recorder`` now if its module has run,
    else the moment it does (``--extract``'s record run, ``--window``'s run)."""
    target = spec["module"]
    name = os.path.splitext(os.path.basename(target))[0] if target.endswith(".py") else target

    def action(module):
        if _module_matches(module, spec):
            wrap(module, spec["qualname"], recorder)

    if name in sys.modules:
        action(sys.modules[name])
    after_import({name}, action)


def install():
    """Set up the record run in this process (called by the start-up hook)."""
    spec = json.loads(os.environ[SPEC_ENV])  # before FUNC is wrapped: json may be FUNC's module
    recorder = Recorder(spec)
    wrap_when_loaded(spec, recorder)
    after_import({TIRX_IKET}, plain)
    import atexit

    atexit.register(recorder.at_exit)
