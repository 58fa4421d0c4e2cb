"""``iket profile --extract``'s capture passes: call FUNC again with the saved arguments.

The passes run this file's :func:`main` as their function target (through the shim), so
only what FUNC launches runs under IKET. It imports FUNC's module as the record run found
it, without running a script's ``__main__``; loads each saved call's arguments onto their
devices (tensors with their dtype, shape and strides); calls the original FUNC; synchronises;
and compares each result with the recorded one (allclose for tensors). The comparison goes
to ``replay.json`` beside the saved calls and, where results differ, to standard error: a
kernel that reads state its arguments do not carry.

Runs in the user's interpreter; imports torch or numpy only if the saved calls hold them.
"""

import importlib
import importlib.util
import os
import sys

from iket_load import load_part
from iket_saved import (
    CHECK,
    DAMAGE,
    DAMAGED,
    DIR_ENV,
    Damaged,
    check_files,
    read_index,
    under,
    write_json,
)

#: How many differences a comparison names before it stops looking.
MAX_DIFFERENCES = 5


def function(index, capture):
    """The original FUNC, imported as the record run found it: from under its source root
    (``path0``), which lies outside the capture (:class:`Damaged` otherwise)."""
    module_name, root = index["module"], os.path.realpath(index["path0"] or ".")
    if under(root, capture):
        raise Damaged(f"path0 {index['path0']} lies inside the capture: a capture's code is never imported")
    sys.path[0] = root
    origin = module_name if module_name.endswith(".py") else getattr(_find(module_name), "origin", None)
    if not origin or not under(origin, root) or under(origin, capture):
        raise Damaged(f"module {module_name} is not found under its source root {root}, outside the capture")
    if module_name.endswith(".py"):
        name = os.path.splitext(os.path.basename(module_name))[0]
        spec = importlib.util.spec_from_file_location(name, module_name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    *classes, name = index["qualname"].split(".")
    owner = module
    for part in classes:
        owner = getattr(owner, part)
    raw = owner.__dict__[name] if classes else getattr(owner, name)
    return raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw


def _find(name):
    """Where module ``name`` would be imported from (its parents are imported to find it)."""
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def differences(got, want, where="result"):
    """Where ``got`` differs from ``want``: a list of short sentences (empty when equal)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(want, torch.Tensor):
        return _tensor_differences(torch, got, want, where)
    if type(want).__module__ == "numpy" and hasattr(want, "shape"):
        import numpy

        if not hasattr(got, "shape") or got.shape != want.shape:
            return [f"{where}: shape {getattr(got, 'shape', None)} instead of {want.shape}"]
        same = numpy.allclose(got, want, equal_nan=True) if want.dtype.kind in "fc" else (got == want).all()
        return [] if same else [f"{where}: values differ"]
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return [f"{where}: {type(got).__name__} of another length"]
        found = []
        for i, (a, b) in enumerate(zip(got, want)):  # noqa: B905  (any Python 3 runs this file)
            found += differences(a, b, f"{where}[{i}]")
        return found[:MAX_DIFFERENCES]
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return [f"{where}: other keys"]
        found = []
        for key in want:
            found += differences(got[key], want[key], f"{where}[{key!r}]")
        return found[:MAX_DIFFERENCES]
    try:
        return [] if got == want else [f"{where}: {got!r:.60} instead of {want!r:.60}"]
    except Exception:
        return []  # not comparable: not a difference iket can name


def _tensor_differences(torch, got, want, where):
    if not isinstance(got, torch.Tensor):
        return [f"{where}: {type(got).__name__} instead of a tensor"]
    if got.shape != want.shape or got.dtype != want.dtype:
        return [f"{where}: {tuple(got.shape)} {got.dtype} instead of {tuple(want.shape)} {want.dtype}"]
    a, b = got.detach().to("cpu"), want.detach().to("cpu")
    if a.is_floating_point() or a.is_complex():
        if torch.allclose(a, b, equal_nan=True):
            return []
        gap = (a.double() - b.double()).abs().nan_to_num().max().item() if a.numel() else 0.0
        return [f"{where}: values differ (largest difference {gap:.3g})"]
    return [] if torch.equal(a, b) else [f"{where}: values differ"]


def main():
    """Replay every saved call (the passes' function target)."""
    folder = os.environ[DIR_ENV]
    try:
        index = read_index(folder)
        check_files(folder, index)
        func = function(index, os.path.dirname(os.path.realpath(folder)))
    except Damaged as damage:
        _damaged(folder, None, damage)
    checks = []
    for call in index["calls"]:
        saved = os.path.join(folder, call["folder"])
        try:
            args, kwargs = load_part(saved, "inputs", call["parts"]["inputs"], index["path0"])
            want = load_part(saved, "result", call["parts"]["result"], index["path0"])
        except Damaged as damage:
            _damaged(folder, call["call"], damage)
        result = func(*args, **kwargs)
        _synchronize()
        found = differences(result, want)
        checks.append({"call": call["call"], "equal": not found, "differences": found})
        for difference in found:
            print(f"iket: warning: call {call['call']} of {index['function']}: {difference}", file=sys.stderr)
    write_json(os.path.join(folder, CHECK), {"calls": checks})


def _damaged(folder, call, damage):
    """Tell the CLI which saved call is damaged and how, and end with :data:`DAMAGED`."""
    write_json(os.path.join(folder, DAMAGE), {"call": call, "message": str(damage)})
    print(f"iket: the saved calls are damaged: {damage}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(DAMAGED)


def _synchronize():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
