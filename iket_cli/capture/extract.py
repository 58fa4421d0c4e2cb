"""``iket profile --extract MODULE:FUNC``: record one function's calls in a plain run.

A model's set-up (weights, data, warm-up, compiling everything else) is paid in both
passes of a capture, and a half-precision cuBLAS GEMM anywhere in the process kills it
inside run-iket's injection (run-iket 4.8.1). With ``--extract`` the workload runs once,
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
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TargetError, UsageError
from ..model.vocab import EXTRACT_DIR
from ._hook.iket_saved import CHECK, DIR_ENV, INDEX
from .hook import HOOK_DIR
from .targets import Target, find_module, parse_source, top_level_binding

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

    def key(self) -> dict[str, Any]:
        """What decides the replay's tracker pass (capture/plan.tracker_key): FUNC, its
        module's source and the saved calls' signature, not the model that made them. So
        ``--replay`` reuses the tracker pass of the ``--extract`` capture it replays (until the
        kernel's module is edited), and a second ``--extract`` of the same call does too."""
        from .trackers import digest

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


def parse_calls(text: str) -> tuple[int, ...] | str:
    """``--calls``: ``N``, ``A-B`` or ``last``."""
    word = str(text).strip().lower()
    if word == "last":
        return "last"
    first, _, last = word.partition("-")
    if first.isdigit() and (not last or last.isdigit()):
        low, high = int(first), int(last or first)
        if 1 <= low <= high:
            return tuple(range(low, high + 1))
    raise UsageError(
        f"--calls {text!r} is not N, A-B or last", hint="e.g. --calls 3, --calls 2-4, --calls last"
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
) -> Extract:
    """Check FUNC before anything runs: its module is found and defines it (exit 2)."""
    from ..model.units import parse_size

    module, sep, qualname = str(function).rpartition(":")
    if not sep or not module or not all(p.isidentifier() for p in qualname.split(".")):
        raise UsageError(
            f"--extract {function!r} is not MODULE:FUNC",
            hint="e.g. --extract kernels:launch or kernels.py:Model.step",
        )
    chosen = parse_calls(calls)
    try:
        limit = max_extract if isinstance(max_extract, int) else parse_size(str(max_extract))
    except UsageError:
        raise UsageError(f"--max-extract {max_extract!r} is not a size", hint="e.g. 512M or 4G") from None
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise UsageError(f"--extract-rank {rank!r} is not a rank", hint="0 for the first process")
    if module.endswith(".py") or "/" in module:
        path = (cwd / module).expanduser().resolve()
        if not path.is_file():
            raise TargetError(
                f"--extract: {module} does not exist", hint="give the module's file or its dotted name"
            )
        source, name, path0 = path, str(path), str(path.parent)
    else:
        source, name = find_module(module, _search_root(record, cwd), python), module
        path0 = str(_root_of(source, module) if source is not None else cwd)
    if source is not None and source.suffix == ".py":
        _check_defined(source, function, qualname)
    if record is not None and record.kind == "script" and source is not None and source == Path(record.spec):
        raise TargetError(
            f"--extract {function}: FUNC is defined in the script itself, which runs as __main__",
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


def _check_defined(source: Path, function: str, qualname: str) -> None:
    """FUNC (``func`` or ``Class.method``) is, or may be, a callable of ``source`` (exit 2 if not)."""
    owner: ast.Module | ast.ClassDef = parse_source(source)
    *classes, name = qualname.split(".")
    for part in classes:
        found = [n for n in owner.body if isinstance(n, ast.ClassDef) and n.name == part]
        if not found:
            raise TargetError(
                f"--extract {function}: no class {part} in {source.name}", hint="check the name"
            )
        owner = found[-1]
    binding = top_level_binding(owner, name)
    if binding == "missing":
        raise TargetError(
            f"--extract {function}: {source.name} defines no function {qualname}",
            hint="name the Python function that launches the kernel (module:func or module:Class.method)",
        )
    if binding == "constant":
        raise TargetError(f"--extract {function} is not callable", hint="name a function or a method")


def from_capture(folder: Path, cwd: Path) -> tuple[Target, Extract]:
    """``--replay DIR``: the target and FUNC of the capture whose saved calls are replayed."""
    from ..model import manifest

    folder = (cwd / folder).resolve()
    data = manifest.read(folder)
    index = read_index(folder / EXTRACT_DIR)
    if not data.get("extract") or not index.get("calls"):
        raise UsageError(
            f"--replay {folder.name}: it holds no saved calls (it was not captured with --extract)",
            hint="capture it first: iket profile WORKLOAD --extract MODULE:FUNC -o DIR",
        )
    target = data["target"]
    module = str(index["module"])
    try:
        source = Path(module) if module.endswith(".py") else find_module(module, Path(index["path0"]), "")
    except TargetError:
        source = None
    extract = Extract(
        function=str(index["function"]),
        module=module,
        qualname=str(index["qualname"]),
        calls=tuple(int(c["call"]) for c in index["calls"]),
        max_bytes=0,
        rank=int(index.get("rank") or 0),
        stop_after=True,
        path0=str(index["path0"]),
        source=source,
        replay_of=folder,
        saved=signature(folder / EXTRACT_DIR),
    )
    return Target(str(target["kind"]), str(target["spec"]), tuple(target.get("args") or ())), extract


def refuse_same(folder: Path, output: Path, cwd: Path) -> None:
    """``--replay DIR -o DIR`` would replace the capture that holds the calls (exit 2)."""
    if (cwd / folder).resolve() == output.resolve():
        raise UsageError(
            f"--replay {folder} -o {folder}: the new capture would replace the one it replays",
            hint="give another output directory: iket profile --replay DIR -o NEW",
        )


def copy_saved(extract: Extract, folder: Path) -> dict[str, Any]:
    """``--replay``: the earlier capture's saved calls, copied into this capture's ``folder``."""
    assert extract.replay_of is not None
    source = extract.replay_of / EXTRACT_DIR
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns(CHECK))
    facts = record_facts(read_index(folder), None)
    facts["record"] = None
    facts["replay_of"] = str(extract.replay_of)
    return facts


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


def signature(folder: Path) -> str:
    """What the saved calls in ``folder`` are: call numbers, argument kinds, shapes and dtypes
    (not their values, which change no kernel's launch)."""
    import hashlib

    calls = [
        (c.get("call"), c.get("arguments"), c.get("result")) for c in read_index(folder).get("calls") or []
    ]
    return hashlib.sha256(json.dumps(calls, sort_keys=True, default=str).encode()).hexdigest()[:24]


def read_index(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / INDEX).read_text())
    except (OSError, ValueError):
        return {}


def replay_env(folder: Path) -> dict[str, str]:
    """What the passes' replay process needs: where the saved calls are."""
    return {DIR_ENV: str(folder)}


def replay_check(folder: Path) -> dict[str, Any] | None:
    """The replay's comparison with the recorded results (the last pass's), if it wrote one."""
    try:
        return json.loads((folder / CHECK).read_text())
    except (OSError, ValueError):
        return None
