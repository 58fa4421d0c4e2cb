"""A warm standby for script and function targets: the second pass skips the slow imports.

run-iket runs the workload twice, and each pass imports the workload's libraries before
its kernel runs. For a script (``script.py``) or function target (``script.py:func``,
``pkg.module:func``) iket starts one more process of the same interpreter beside the
tracker pass: it imports the
libraries the target imports at its top level that are safe to import early, then listens
on a socket. The shim of whichever pass starts after it is ready (normally the capture
pass) hands its call over (see ``_shim.py``): the standby forks a worker that takes the
pass's environment (the injection variables run-iket set), working directory and standard
streams, and makes the call. No pass ever waits for the standby.

Safe to import early means: the import neither reads the pass's environment nor
initialises CUDA (the driver reads ``CUDA_INJECTION64_PATH`` in ``cuInit``, and a process
forked after ``cuInit`` cannot use CUDA). torch and numpy qualify. TIRx does not: on the
H200 a worker forked after ``import tvm_tirx.backend.cuda`` failed with
``cudaErrorInitializationError``; CuTe DSL reads ``CUTE_DSL_COMPILER_OPT``, which run-iket
extends per pass. The user's own module is never imported early. The standby checks after
each import that CUDA is still uninitialised and otherwise does not serve.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...errors import TargetError
from ...system import spawn
from .._shim import SERVING, WARM_ENV
from ..targets import SHIM, Target, find_module

#: Top-level packages a standby may import: their import-time state is the same in both passes.
PRELOADABLE = ("torch", "numpy")


def modules_for(target: Target, cwd: Path) -> list[str]:
    """The modules of preloadable packages the target's source imports at its top level.

    Read from the source with ``ast`` (nothing is imported here); empty for targets that
    are not functions, or whose source iket cannot find.
    """
    source = source_of(target, cwd)
    if source is None:
        return []
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except (OSError, SyntaxError, ValueError):
        return []
    found: list[str] = []
    for node in _top_level(tree.body):
        if isinstance(node, ast.ImportFrom) and node.level:
            continue  # a relative import: the user's own package
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for name in names:  # the module itself: a package's submodules can be the slow part
            if name.split(".")[0] in PRELOADABLE and name not in found:
                found.append(name)
    return found


def _top_level(body: list[ast.stmt]):
    """Import statements run at import time: the module body, and inside its if/try blocks."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try)):
            handlers = [h.body for h in getattr(node, "handlers", [])]
            for block in (node.body, node.orelse, getattr(node, "finalbody", []), *handlers):
                yield from _top_level(block)


def source_of(target: Target, cwd: Path) -> Path | None:
    """The file a script target is, or a function target's module lives in, if iket can find
    it without importing."""
    if target.kind not in ("function", "script"):
        return None
    module = target.spec.rsplit(":", 1)[0] if target.kind == "function" else target.spec
    if module.endswith(".py") or "/" in module:
        path = Path(module) if Path(module).is_absolute() else cwd / module
        return path if path.is_file() else None
    try:
        return find_module(module, cwd, sys.executable)
    except TargetError:  # a missing module is reported by target resolution, not here
        return None


def socket_dir(token: str) -> Path:
    """The standby's socket folder for the capture with ``token``: short (AF_UNIX paths are
    limited to 107 bytes), so in the temporary folder, not beside DIR; named by the token so
    that the watchdog and the next capture can remove it."""
    return Path(tempfile.gettempdir()) / f"iket-warm-{token}"


@dataclass
class Standby:
    """One standby process and its socket; :meth:`close` ends it whatever it is doing."""

    modules: list[str]
    log_path: Path
    socket_dir: Path
    process: subprocess.Popen | None = None
    env: dict[str, str] | None = None  # what a pass's environment needs to find it, once started

    @property
    def socket_path(self) -> Path:
        return self.socket_dir / "s"

    def start(self, python: str, env: dict[str, str], cwd: Path) -> dict[str, str]:
        """Start the standby; returns what the passes' environment needs to find it."""
        self.socket_dir.parent.mkdir(mode=0o700, exist_ok=True)
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = spawn.start(
                [python, SHIM, "serve", self.socket_path, *self.modules],
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=log,
                new_session=True,  # its own group: close() kills the worker with it
            )
        self.env = {WARM_ENV: str(self.socket_path)}
        return self.env

    def close(self) -> dict[str, object]:
        """Kill the standby and its worker, remove the socket; what the manifest records."""
        if self.process is not None:
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        return {"modules": self.modules, "used": self.used()}

    def used(self) -> bool:
        """True when a pass handed its call over (the standby logs it)."""
        try:
            return SERVING.encode() in self.log_path.read_bytes()
        except OSError:
            return False


def standby_for(
    target: Target, cwd: Path, log_path: Path, token: str, enabled: bool = True, name: str = "pass"
) -> Standby | None:
    """A standby for this target, or None when it would not help (no heavy imports found).

    Its socket folder, ``name`` inside the capture's (:func:`socket_dir`): the standbys of a
    repeated capture (one per repeat) each have their own; the watchdog and the next
    capture remove the capture's folder with all of them."""
    if not enabled or target.kind not in ("function", "script"):
        return None
    modules = modules_for(target, cwd)
    return Standby(modules, log_path, socket_dir(token) / name) if modules else None
