"""What to run: the four target forms of ``iket profile`` and their checks.

A target is checked *before* anything runs, without importing the user's code (that would
import torch or TIRx into the CLI's own process): files are looked up on disk, modules
through the path finders (which execute nothing), and functions in the source's syntax
tree. What cannot be decided statically (a name made by ``from x import *``) is left to
the shim, which reports it in the tracker pass.
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.machinery import PathFinder
from pathlib import Path

from ..errors import TargetError

SHIM = Path(__file__).with_name("_shim.py")


@dataclass(frozen=True)
class Target:
    """One thing to capture.

    ``kind`` is ``script``, ``function``, ``module`` or ``command``; ``spec`` is the script
    path, ``file.py:func`` or ``pkg.module:func``, the module name, or the command's program;
    ``args`` follow it.
    """

    kind: str
    spec: str
    args: tuple[str, ...] = field(default_factory=tuple)

    @property
    def stem(self) -> str:
        """A short name for default output directories (``iket-<stem>``)."""
        if self.kind == "command":
            return Path(self.spec).name or "command"
        base = self.spec.rsplit(":", 1)[0] if self.kind == "function" else self.spec
        if base.endswith(".py") or "/" in base:
            return Path(base).stem
        return base.rsplit(".", 1)[-1]

    def describe(self) -> str:
        """The target as the user would type it, for messages and the manifest."""
        head = {"module": ["-m", self.spec], "command": ["--", self.spec]}.get(self.kind, [self.spec])
        return " ".join([*head, *self.args])

    def workload_argv(self, python: str) -> list[str]:
        """The command run-iket runs in each pass: always through the shim."""
        shim = [python, str(SHIM)]
        if self.kind == "script":  # "script": exec, or run in the warm standby's worker
            return [*shim, "script", python, self.spec, *self.args]
        if self.kind == "module":
            return [*shim, "exec", python, "-m", self.spec, *self.args]
        if self.kind == "function":
            module, func = self.spec.rsplit(":", 1)
            return [*shim, "call", module, func, *self.args]
        return [*shim, "exec", self.spec, *self.args]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "spec": self.spec, "args": list(self.args)}


def parse(kind: str, words: Sequence[str]) -> Target:
    """Build a target from the words after ``iket profile``'s options.

    ``kind`` is ``"command"`` (words came after ``--``), ``"module"`` (after ``-m``) or
    ``"positional"`` (a script or a ``:func`` target and its arguments).
    """
    if not words:
        raise TargetError(
            "no target given",
            hint="usage: iket profile script.py | script.py:func | -m module | -- COMMAND",
        )
    head, rest = words[0], tuple(words[1:])
    if kind in ("command", "module"):
        return Target(kind, head, rest)
    if _looks_like_function(head):
        return Target("function", head, rest)
    return Target("script", head, rest)


def _looks_like_function(word: str) -> bool:
    base, sep, func = word.rpartition(":")
    return bool(sep and base and func.isidentifier())


def resolve(target: Target, *, cwd: Path, python: str, env: dict[str, str]) -> Target:
    """Check that ``target`` exists and return it with its paths made absolute.

    Raises :class:`TargetError` (exit 2) with a one-line message naming the fix.
    """
    if target.kind == "script":
        return Target("script", str(_existing_file(target.spec, cwd)), target.args)
    if target.kind == "module":
        find_module(target.spec, cwd, python)
        return target
    if target.kind == "function":
        return _resolve_function(target, cwd, python)
    program = _find_program(target.spec, cwd, env)
    return Target("command", program, target.args)


def _existing_file(spec: str, cwd: Path) -> Path:
    path = Path(spec).expanduser()
    if not path.is_absolute():
        path = cwd / path
    if not path.is_file():
        what = "is a directory, not a script" if path.is_dir() else "does not exist"
        raise TargetError(
            f"script {spec} {what}",
            hint="give the path of a Python file, or use -m MODULE or -- COMMAND",
        )
    return path.resolve()


def find_module(name: str, cwd: Path, python: str) -> Path | None:
    """Locate a module's source without executing any package ``__init__``.

    Returns None when the module lives under another interpreter (``--python``) whose
    path is not ours to search; the shim then checks it inside the pass.
    """
    search: list[str] | None = [str(cwd), *sys.path]
    spec = None
    for depth, part in enumerate(name.split(".")):
        qualified = ".".join(name.split(".")[: depth + 1])
        spec = PathFinder.find_spec(qualified, search)
        if spec is None:
            if _same_python(python):
                raise TargetError(
                    f"module {name} not found",
                    hint=f"check the name, or run from the folder that holds {part}",
                )
            return None
        search = list(spec.submodule_search_locations or [])
    if spec is not None and spec.submodule_search_locations is not None:
        init = Path(spec.submodule_search_locations[0]) / "__init__.py"
        return init if init.is_file() else None
    return Path(spec.origin) if spec and spec.origin else None


def _resolve_function(target: Target, cwd: Path, python: str) -> Target:
    module, func = target.spec.rsplit(":", 1)
    if module.endswith(".py") or "/" in module:
        source = _existing_file(module, cwd)
        spec = f"{source}:{func}"
    else:
        found = find_module(module, cwd, python)
        source, spec = found, target.spec
    if source is not None and source.suffix == ".py":
        _check_function(source, module, func)
    return Target("function", spec, target.args)


def parse_source(source: Path) -> ast.Module:
    """``source``'s syntax tree, or the one-line error of a file that does not parse (exit 2)."""
    try:
        return ast.parse(source.read_bytes(), filename=str(source))
    except SyntaxError as error:
        raise TargetError(
            f"{source} does not parse: {error.msg} (line {error.lineno})",
            hint="fix the syntax error first",
        ) from None


def _check_function(source: Path, module: str, func: str) -> None:
    """Fail unless ``func`` is (or may be) a callable defined at the top of ``source``."""
    binding = top_level_binding(parse_source(source), func)
    if binding == "missing":
        raise TargetError(
            f"{module} has no function {func!r}",
            hint=f"define def {func}(): at the top level of {source.name}, or name another",
        )
    if binding in ("constant", "module"):
        raise TargetError(
            f"{module}:{func} is not callable" + (" (a module it imports)" if binding == "module" else ""),
            hint="name a function that takes no arguments",
        )


def top_level_binding(tree: ast.Module | ast.ClassDef, name: str) -> str:
    """``"callable"``, ``"constant"``, ``"module"`` (``import NAME``), ``"unknown"`` or
    ``"missing"`` for a name bound at the top of a module (or of a class's body)."""
    verdict = "missing"
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                verdict = "callable"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                is_literal = isinstance(node.value, (ast.Constant, ast.List, ast.Dict, ast.Tuple))
                verdict = "constant" if is_literal else "unknown"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    # "import NAME" binds a module; "from M import NAME": callable or not, the run tells
                    verdict = "module" if isinstance(node, ast.Import) else "unknown"
                elif alias.name == "*" and verdict == "missing":
                    verdict = "unknown"
        elif isinstance(node, (ast.If, ast.Try, ast.With)) and _binds_inside(node, name):
            verdict = "unknown"
    return verdict


def _binds_inside(node: ast.AST, name: str) -> bool:
    """Whether a compound statement at the top level may bind ``name`` (if/try blocks)."""
    for child in ast.walk(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if child.name == name:
                return True
        elif isinstance(child, ast.Name) and child.id == name and isinstance(child.ctx, ast.Store):
            return True
        elif isinstance(child, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name.split(".")[0]) == name for alias in child.names
        ):
            return True  # "if KERNEL == 'cute': from a import f / else: from b import f"
    return False


def _find_program(program: str, cwd: Path, env: dict[str, str]) -> str:
    if os.sep in program:
        path = Path(program) if Path(program).is_absolute() else cwd / program
        if path.is_file() and os.access(path, os.X_OK):
            return str(path.resolve())
        raise TargetError(
            f"command {program} {'is not executable' if path.is_file() else 'does not exist'}",
            hint="check the path, or chmod +x it",
        )
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise TargetError(f"command {program!r} not found on PATH", hint="check its name or PATH")
    return program


def _same_python(python: str) -> bool:
    resolved = shutil.which(python) or python
    try:
        return os.path.samefile(resolved, sys.executable)
    except OSError:
        return False
