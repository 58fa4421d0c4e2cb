"""Finding run-iket, learning its version, and the environment its passes need.

The lookup order is ``--run-iket PATH``, then ``$IKET_RUN_IKET``, then the ``run-iket``
installed beside the CLI's own Python, then ``PATH``. With ``nvidia-cutlass-dsl-libs-base``
alone, ``import iket`` fails (the ``.pth`` that exposes it ships in another package), so
every child gets that package's ``dsl_packages`` folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import IketError, ToolchainError
from ..model import runiket_facts
from . import spawn

DISTRIBUTION = runiket_facts.DISTRIBUTION
INSTALL_HINT = f"pip install '{runiket_facts.INSTALL}', or pass --run-iket PATH"

# Asked of a foreign interpreter (one that is not the CLI's): where is the iket package
# and which version is installed. Must stay importable on any Python 3.
_PROBE = f"""
import json, importlib.metadata as m
try:
    d = m.distribution({DISTRIBUTION!r})
    print(json.dumps([d.version, str(d.locate_file("nvidia_cutlass_dsl/dsl_packages"))]))
except m.PackageNotFoundError:
    print(json.dumps([None, None]))
"""


@dataclass(frozen=True)
class RunIket:
    """A located run-iket: its executable, version and the folder that holds ``iket``."""

    path: str
    version: str | None
    dsl_packages: str | None

    def child_env(self, base: dict[str, str]) -> dict[str, str]:
        """The environment of run-iket and both passes, built from ``base``."""
        env = dict(base)
        if self.dsl_packages and Path(self.dsl_packages).is_dir():
            env["PYTHONPATH"] = prepend_path(self.dsl_packages, env.get("PYTHONPATH"))
        # TIRx checks that `run-iket` on PATH is the one running it.
        env["PATH"] = prepend_path(str(Path(self.path).parent), env.get("PATH", os.defpath))
        env["TVM_TIRX_IKET_INJECTED_CHILD_ENABLE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"  # run-iket's phase lines must arrive as they happen
        return env


def prepend_path(entry: str, current: str | None) -> str:
    """``entry`` first in a ``PATH``-style list, once."""
    parts = [p for p in (current or "").split(os.pathsep) if p and p != entry]
    return os.pathsep.join([entry, *parts])


def find(explicit: str | None = None, env: dict[str, str] | None = None) -> RunIket:
    """Locate run-iket and check that it is the oldest release iket runs with or newer
    (:data:`~iket_cli.model.runiket_facts.MINIMUM`). Raises :class:`ToolchainError`."""
    env = dict(os.environ if env is None else env)
    path = _locate(explicit, env)
    version, dsl_packages = _describe(path, env)
    _check_version(path, version)
    return RunIket(path=path, version=version, dsl_packages=dsl_packages)


def _locate(explicit: str | None, env: dict[str, str]) -> str:
    for origin, value in (("--run-iket", explicit), ("IKET_RUN_IKET", env.get("IKET_RUN_IKET"))):
        if value:
            found = shutil.which(value) if os.sep not in value else value
            if found and os.path.isfile(found) and os.access(found, os.X_OK):
                return os.path.abspath(found)
            raise ToolchainError(
                f"run-iket given by {origin} ({value}) is not an executable file",
                hint=INSTALL_HINT,
            )
    beside = Path(sys.executable).parent / "run-iket"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("run-iket", path=env.get("PATH", os.defpath))
    if found:
        return os.path.abspath(found)
    raise ToolchainError("run-iket is not installed", hint=INSTALL_HINT)


def _interpreter(path: str) -> str | None:
    """The interpreter named on the script's ``#!`` line, if any."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        return shutil.which(words[1])
    return words[0]


def _describe(path: str, env: dict[str, str]) -> tuple[str | None, str | None]:
    """(version, dsl_packages folder) of the distribution that provides ``path``."""
    python = _interpreter(path)
    if python and _is_own_python(python):
        return own_distribution()
    if not python:
        return None, None
    try:
        out = spawn.run([python, "-c", _PROBE], env=env, timeout=60)
        version, folder = json.loads(out.stdout.strip().splitlines()[-1])
    except (IketError, ValueError, IndexError):
        return None, None
    return version, folder


def _is_own_python(python: str) -> bool:
    try:
        return os.path.samefile(python, sys.executable)
    except OSError:
        return False


def own_distribution() -> tuple[str | None, str | None]:
    """(version, dsl_packages folder) of the libs-base installed beside the CLI: its
    ``.dist-info`` folder found on ``sys.path`` by name (under a millisecond; importlib.metadata's
    import and search took some 25 ms of each run's start), else as importlib.metadata finds it."""
    stem = DISTRIBUTION.replace("-", "_")
    for entry in sys.path:
        folder = Path(entry or ".")
        try:
            found = sorted(folder.glob(f"{stem}-*.dist-info"))
        except OSError:
            continue
        if found:
            version = found[0].name[len(stem) + 1 : -len(".dist-info")]
            return version, str(folder / "nvidia_cutlass_dsl" / "dsl_packages")
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None, None
    return dist.version, str(dist.locate_file("nvidia_cutlass_dsl/dsl_packages"))


def parse_version(text: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: ``4.10.0rc1`` -> ``(4, 10, 0)``."""
    parts = []
    for piece in text.split("."):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
        if match.group() != piece:
            break
    return tuple(parts)


def _check_version(path: str, version: str | None) -> None:
    if version is None:
        return  # a run-iket we cannot introspect (a wrapper): trust the user's choice
    if parse_version(version) < runiket_facts.MINIMUM:
        raise ToolchainError(
            f"run-iket at {path} is {DISTRIBUTION} {version}, older than {runiket_facts.MINIMUM_TEXT} "
            "(its default output directory was the working directory)",
            hint=f"pip install -U '{runiket_facts.INSTALL}'",
        )


def refuse_foreign_injection(env: dict[str, str]) -> None:
    """IKET is itself a CUDA injection tool: it cannot run under Nsight or another one."""
    value = env.get("CUDA_INJECTION64_PATH")
    if value:
        raise ToolchainError(
            f"CUDA_INJECTION64_PATH is already set ({value}): iket appears to run under "
            "Nsight or another CUPTI tool, which cannot be combined with IKET",
            hint="unset CUDA_INJECTION64_PATH, or run iket outside that tool",
        )
