"""What lets a process's own kernels be traced by an in-process session.

run-iket prepares the workload's environment before it runs; a window opened inside the
user's process (``iket_cli.window``) must do the same for the kernels that process builds:

- **CuTe DSL** strips IKET's ops when it JIT-compiles, unless ``<PREFIX>_COMPILER_OPT`` holds
  ``iket`` (read in ``cutlass/base_dsl/env_manager.py``; run-iket appends it for the
  ``CUTE_DSL`` and ``CUTE_EXPERIMENTAL_DSL`` prefixes, ``iket/cli/base.py``). The variables
  are read when a kernel compiles: set before the first compile, or pass
  ``cute.compile(..., options="iket")``. A kernel compiled before stays without IKET ops.
- **TIRx** refuses to load an IKET kernel unless run-iket's variables name an injection and
  its config (``tvm_tirx.backend.cuda.iket._validate_official_environment``). iket's hook
  replaces that check, in this process only, by one that asks nothing of run-iket: the
  session is NVIDIA's own library, loaded by hand. Nothing of TIRx is edited on disk.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import sys
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

from .._hook.iket_imports import after_import
from .._hook.iket_tirx import TIRX_IKET

#: The CuTe-family DSLs whose ``<PREFIX>_COMPILER_OPT`` keeps IKET ops (run-iket's list).
CUTE_PREFIXES = ("CUTE_DSL", "CUTE_EXPERIMENTAL_DSL")
#: An ``iket`` token already in a compiler option string.
_IKET_TOKEN = re.compile(r"(?:^|(?<=[\s,]))(?:--)?iket(?:=?\{[^}]*\}|=[^\s,]*)?(?:[\s,]+|$)")
#: The check of TIRx's IKET module that iket's hook stands aside.
TIRX_CHECK = "_validate_official_environment"


def prepare(environ: MutableMapping[str, str] | None = None) -> None:
    """Ready this process for windows: TIRx's IKET kernels load outside run-iket (now and
    whenever TIRx is imported), CuTe DSL keeps IKET's ops in what it compiles from now on.
    Idempotent; a model that runs its IKET kernels before its first window needs this first."""
    keep_cute_ops(os.environ if environ is None else environ)
    stand_aside_tirx()


def keep_cute_ops(environ: MutableMapping[str, str]) -> list[str]:
    """Add ``iket`` to each CuTe DSL's compiler options in ``environ`` (a space before it:
    CuTe's parser reads ``name=value`` up to whitespace); the variables changed."""
    changed = []
    for prefix in CUTE_PREFIXES:
        name = f"{prefix}_COMPILER_OPT"
        value = environ.get(name, "")
        if not _IKET_TOKEN.search(value):
            environ[name] = f"{value} iket".strip()
            changed.append(name)
    return changed


def stand_aside_tirx() -> None:
    """TIRx's run-iket check replaced in this process: now if TIRx's IKET module is loaded,
    else as soon as it is."""
    module = sys.modules.get(TIRX_IKET)
    if module is not None:
        _replace_check(module)
    elif not any(getattr(finder, "action", None) is _replace_check for finder in sys.meta_path):
        after_import({TIRX_IKET}, _replace_check, once=True)


def _replace_check(module: Any) -> None:
    if getattr(getattr(module, TIRX_CHECK, None), "iket_in_process", False):
        return

    def in_process() -> str:
        """The in-process session is NVIDIA's injection, loaded by iket: no run-iket to check."""
        return shutil.which("run-iket") or ""

    in_process.iket_in_process = True  # type: ignore[attr-defined]
    setattr(module, TIRX_CHECK, in_process)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Stop, save and destroy a session as one step: a second Ctrl-C (or a SIGTERM) arriving
    meanwhile waits for the end of the block, so the trace is saved and the patched kernels
    restored before it is raised. Outside the main thread nothing is held (signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def synchronize() -> None:
    """Wait for the GPU work the process launched, so a window holds what ran in it: through
    torch where the process uses it, else the driver's current context (none: nothing ran)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        return
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return  # no driver, so no kernel ran
    context = ctypes.c_void_p()
    if driver.cuCtxGetCurrent(ctypes.byref(context)) == 0 and context.value:
        driver.cuCtxSynchronize()
