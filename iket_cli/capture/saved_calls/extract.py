"""``iket profile --extract MODULE:FUNC``: record one function's calls in a plain run.

A model's set-up (weights, data, warm-up, compiling everything else) is paid in both
passes of a capture, and a half-precision cuBLAS GEMM anywhere in the process kills it
inside run-iket's injection. With ``--extract`` the workload runs once,
without run-iket (the *record run*), while the start-up hook wraps FUNC and saves the
chosen calls' arguments and results into the capture's ``extract/`` folder
(``_hook/iket_extract.py``). The passes then run a replay process that imports FUNC's
module and calls FUNC with those arguments (``_hook/iket_replay.py``): only what FUNC
launches runs under IKET.

Everything about FUNC that can be checked before a process starts is checked here, from
the source (nothing of the user's is imported into the CLI).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import TargetError, UsageError
from ...model import jsonio
from .._hook import iket_saved as saved_format
from .._hook.iket_saved import CHECK, DIR_ENV, INDEX
from ..hook import HOOK_DIR
from ..targets import Target, find_module, parse_source, top_level_binding

#: Modules whose functions are never FUNC: the hook itself uses them (``json:dump`` would
#: record its own writing of the index) and no kernel is launched from them.
STANDARD_LIBRARY = frozenset(getattr(sys, "stdlib_module_names", ())) | {"json", "os", "pickle", "shutil"}

#: The passes' function target: call FUNC with the saved arguments.
REPLAY_TARGET = Target("function", f"{HOOK_DIR / 'iket_replay.py'}:main")


@dataclass(frozen=True)
class Extract:
    """What ``--extract`` records, resolved: FUNC, which calls, the limits."""

    function: str  # MODULE:FUNC as the user gave it
    module: str  # a dotted module name, or the absolute path of a .py file
    qualname: str  # func, or Class.method
    calls: tuple[int, ...] | str  # call numbers (1-based), or "last"
    max_bytes: int
    rank: int
    stop_after: bool
    path0: str  # sys.path[0] under which the module imports, in the record run and the replay
    source: Path | None  # the module's file, where iket found it
    replay_of: Path | None = None  # --replay: the capture whose saved calls are replayed
    #: The saved calls' signature (:func:`signature`): known once they are saved or copied.
    saved: str | None = None
    #: ``--replay``: the digest of the saved calls as checked (capture/saved_calls/replay_trust.py).
    digest: str | None = None

    def key(self) -> dict[str, Any]:
        """What decides the replay's tracker pass (capture/plan.tracker_key): FUNC, its
        module's source and the saved calls' signature, not the model that made them. So
        ``--replay`` reuses the tracker pass of the ``--extract`` capture it replays (until the
        kernel's module is edited), and a second ``--extract`` of the same call does too."""
        from ..two_pass.trackers import digest

        return {"function": self.function, "module": digest(self.source), "saved": self.saved}

    def spec(self, folder: Path) -> dict[str, Any]:
        """The record run's instructions to the hook (``IKET_CLI_EXTRACT``)."""
        return {
            "function": self.function,
            "module": self.module,
            "qualname": self.qualname,
            "calls": self.calls if self.calls == "last" else list(self.calls),
            "max": self.max_bytes,
            "rank": self.rank,
            "stop": self.stop_after,
            "path0": self.path0,
            "dir": str(folder),
        }

    def describe_calls(self) -> str:
        if self.calls == "last":
            return "the last call"
        first, last = self.calls[0], self.calls[-1]
        return f"call {first}" if first == last else f"calls {first}-{last}"


#: The most calls one capture saves (each is a folder of arguments and results).
MAX_CALLS = 1000
#: The largest call number taken (a model's steps, not an overflow).
MAX_CALL_NUMBER = 10**12


def parse_calls(text: str) -> tuple[int, ...] | str:
    """``--calls``: ``N``, ``A-B`` or ``last``; at most :data:`MAX_CALLS` calls."""
    word = str(text).strip().lower()
    if word == "last":
        return "last"
    # ASCII digits, both ends given: "1-" and a full-width "１" are not calls
    given = re.fullmatch(r"([0-9]{1,13})(?:-([0-9]{1,13}))?", word)
    if given:
        low, high = int(given.group(1)), int(given.group(2) or given.group(1))
        if high - low >= MAX_CALLS and 1 <= low <= high:
            raise UsageError(
                f"--calls {text} would save {high - low + 1:,} calls; iket saves at most {MAX_CALLS:,}",
                hint="choose a narrower range of calls",
            )
        if 1 <= low <= high <= MAX_CALL_NUMBER:
            return tuple(range(low, high + 1))
    raise UsageError(
        f"--calls {str(text)[:40]!r} is not N, A-B or last",
        hint=f"e.g. --calls 3, --calls 2-4, --calls last (call numbers from 1 to {MAX_CALL_NUMBER:,})",
    )


def resolve(
    function: str,
    *,
    record: Target | None,
    calls: str,
    max_extract: str | int,
    rank: int,
    stop_after: bool,
    cwd: Path,
    python: str,
    option: str = "--extract",
) -> Extract:
    """Check FUNC before anything runs: its module is found and defines it (exit 2)."""
    from ...model.units import parse_size

    module, sep, qualname = str(function).rpartition(":")
    if not sep or not module or not all(p.isidentifier() for p in qualname.split(".")):
        raise UsageError(
            f"{option} {function!r} is not MODULE:FUNC",
            hint=f"e.g. {option} kernels:launch or kernels.py:Model.step",
        )
    chosen = parse_calls(calls)
    try:
        limit = max_extract if isinstance(max_extract, int) else parse_size(str(max_extract))
    except UsageError:
        raise UsageError(f"--max-extract {max_extract!r} is not a size", hint="e.g. 512M or 4G") from None
    if isinstance(limit, bool) or limit < 1:
        raise UsageError(f"--max-extract {max_extract!r} is not a size", hint="e.g. 512M or 4G")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise UsageError(f"--extract-rank {rank!r} is not a rank", hint="0 for the first process")
    if module.endswith(".py") or "/" in module:
        path = (cwd / module).expanduser().resolve()
        if not path.is_file():
            raise TargetError(
                f"{option}: {module} does not exist", hint="give the module's file or its dotted name"
            )
        if path.suffix != ".py":
            raise TargetError(
                f"{option} {function}: {module} is not a Python file",
                hint="give a .py file or a dotted name",
            )
        source, name, path0 = path, str(path), str(path.parent)
    else:
        if module.split(".")[0] in STANDARD_LIBRARY:
            raise TargetError(
                f"{option} {function}: {module} is Python's standard library",
                hint="name the function of your workload (or of a kernel library) that launches the kernel",
            )
        source, name = find_module(module, _search_root(record, cwd), python), module
        path0 = str(_root_of(source, module) if source is not None else cwd)
    if source is not None and source.suffix == ".py":
        _check_defined(source, function, qualname, option)
    if record is not None and record.kind == "script" and source is not None and source == Path(record.spec):
        raise TargetError(
            f"{option} {function}: FUNC is defined in the script itself, which runs as __main__",
            hint="move FUNC into a module the script imports, and name that module",
        )
    return Extract(function, name, qualname, chosen, limit, rank, stop_after, path0, source)


def _search_root(record: Target | None, cwd: Path) -> Path:
    """Where the workload's ``import MODULE`` looks first: a script's folder, else cwd."""
    if record is not None and record.kind in ("script", "function"):
        spec = record.spec.rsplit(":", 1)[0] if record.kind == "function" else record.spec
        if spec.endswith(".py"):
            return Path(spec).parent
    return cwd


def _root_of(source: Path, module: str) -> Path:
    """The sys.path entry ``module`` was found under."""
    depth = module.count(".") + (1 if source.name == "__init__.py" else 0)
    return source.parents[depth]


def _check_defined(source: Path, function: str, qualname: str, option: str = "--extract") -> None:
    """FUNC (``func`` or ``Class.method``) is, or may be, a callable of ``source`` (exit 2 if not)."""
    owner: ast.Module | ast.ClassDef = parse_source(source)
    *classes, name = qualname.split(".")
    for part in classes:
        found = [n for n in owner.body if isinstance(n, ast.ClassDef) and n.name == part]
        if not found:
            raise TargetError(f"{option} {function}: no class {part} in {source.name}", hint="check the name")
        owner = found[-1]
    binding = top_level_binding(owner, name)
    if binding == "missing":
        raise TargetError(
            f"{option} {function}: {source.name} defines no function {qualname}",
            hint="name the Python function that launches the kernel (module:func or module:Class.method)",
        )
    if binding == "constant":
        raise TargetError(f"{option} {function} is not callable", hint="name a function or a method")
    if binding == "module":
        raise TargetError(
            f"{option} {function} is a module {source.name} imports, not a function",
            hint="name the function that launches the kernel (MODULE:FUNC)",
        )
    defined = [n for n in owner.body if getattr(n, "name", None) == name]
    last = defined[-1] if defined else None
    if isinstance(last, ast.ClassDef):
        raise TargetError(
            f"{option} {function} is a class, not a function",
            hint=f"name one of its methods: {qualname}.METHOD",
        )
    decorators = [ast.unparse(d) for d in getattr(last, "decorator_list", [])]
    if any(
        d in ("property", "functools.cached_property", "cached_property")
        or d.endswith((".setter", ".getter", ".deleter"))
        for d in decorators
    ):
        raise TargetError(
            f"{option} {function} is a property", hint="name the method that launches the kernel"
        )


def record_facts(index: dict[str, Any], seconds: float | None) -> dict[str, Any]:
    """The manifest's ``extract`` record of what the record run saved."""
    return {
        "function": index.get("function"),
        "calls": [c["call"] for c in index.get("calls") or []],
        "arguments": [
            {"call": c["call"], **argument}
            for c in index.get("calls") or []
            for argument in c.get("arguments") or []
        ],
        "bytes": sum(int(c.get("bytes") or 0) for c in index.get("calls") or []),
        "record": {"seconds": seconds, "status": "ok", "pid": index.get("pid"), "rank": index.get("rank")},
        "replay_of": None,
        "replay": None,
    }


def signature(index: dict[str, Any]) -> str:
    """What the saved calls of ``index`` are: call numbers, argument kinds, shapes and dtypes
    (not their values, which change no kernel's launch)."""
    import hashlib

    calls = [(c.get("call"), c.get("arguments"), c.get("result")) for c in index.get("calls") or []]
    return hashlib.sha256(json.dumps(calls, sort_keys=True, default=str).encode()).hexdigest()[:24]


def read_index(folder: Path) -> dict[str, Any]:
    """The record run's index as it is (a failed or interrupted one's too), or {}."""
    try:
        return jsonio.read(folder / INDEX, saved_format.MAX_INDEX_BYTES)
    except (OSError, ValueError):
        return {}


def replay_env(folder: Path) -> dict[str, str]:
    """What the passes' replay process needs: where the saved calls are."""
    return {DIR_ENV: str(folder)}


def read_damage(folder: Path) -> dict[str, Any] | None:
    """What the replay found damaged (``damaged.json``), if it wrote that."""
    try:
        said = jsonio.read(folder / saved_format.DAMAGE, 1 << 16)
    except (OSError, ValueError):
        return None
    return said if isinstance(said, dict) and isinstance(said.get("message"), str) else None


def replay_check(folder: Path) -> dict[str, Any] | None:
    """The replay's comparison with the recorded results (the last pass's), if it wrote one."""
    try:
        return json.loads((folder / CHECK).read_text())
    except (OSError, ValueError):
        return None
