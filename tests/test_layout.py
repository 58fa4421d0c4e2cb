"""The package's layout is its architecture: stages import only from the stages below them.

    model ← system ← {capture, decode, analysis} ← render ← pipeline ← {cli, hosts}

capture, decode and analysis stand side by side: each imports model and system only, never
another of the three. Read from the source with ``ast`` (imports inside functions count
too), so a lazy import that climbs back up a layer, or across to a sibling, fails here as
surely as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "iket_cli"
#: Bottom to top, a layer per row; the stages of one row are siblings, which never import each
#: other. ``errors`` and ``_version`` are the foundation every layer may import; the package's
#: own ``__init__``/``__main__`` (the public API, the entry point) sit on top.
ROWS = [("errors", "_version"), ("model",), ("system",), ("capture", "decode", "analysis"), ("render",),
        ("pipeline",), ("cli", "hosts")]  # fmt: skip
LAYERS = [stage for row in ROWS for stage in row]
FOUNDATION = {"errors", "_version"}
TOP = len(ROWS)
MAX_LINES = 400
#: Files run as scripts in other interpreters: they may import nothing of iket's.
STANDALONE = ("capture/_shim.py", "capture/_hook/sitecustomize.py")


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def dotted(path: Path) -> list[str]:
    """``iket_cli/capture/plan.py`` -> ``["capture", "plan"]``."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def layer(parts: list[str]) -> int:
    """The layer of a module given by its dotted parts below ``iket_cli``."""
    if not parts or parts[0] in ("__init__", "__main__"):
        return TOP
    return next(rank for rank, row in enumerate(ROWS) if parts[0] in row)


def climbs_in(path: Path, source: str | None = None) -> list[str]:
    """Each import of ``path`` (or of ``source`` read as that file) that climbs to a higher
    layer or crosses to a sibling stage of its own row."""
    here = dotted(path)
    mine = layer(here)
    found = []
    for line, target in imported(path, source):
        theirs = layer(target)
        sibling = theirs == mine and mine not in (0, TOP) and target[:1] != here[:1]
        if theirs > mine or sibling:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({here[0]}) imports {'.'.join(target)}")
    return found


def imported(path: Path, source: str | None = None) -> list[tuple[int, list[str]]]:
    """(line, dotted parts below ``iket_cli``) of every import of iket's own modules in
    ``path`` (or in ``source``, read as if it were that file)."""
    text = path.read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, filename=str(path))
    package = dotted(path) if path.name == "__init__.py" else dotted(path)[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "iket_cli":
                    found.append((node.lineno, alias.name.split(".")[1:]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "iket_cli":
                target = node.module.split(".")[1:]
            else:
                continue
            if not node.module:  # `from . import a, b`: each name is a module
                found += [(node.lineno, [*target, alias.name]) for alias in node.names]
            else:
                found.append((node.lineno, target))
    return found


def test_the_layers_are_known():
    heads = {dotted(p)[0] for p in modules() if dotted(p)}
    assert heads - {"__main__"} <= set(LAYERS), "a new top-level module or package needs a layer"


def test_no_module_imports_from_a_higher_layer_or_a_sibling():
    climbs = [climb for path in modules() for climb in climbs_in(path)]
    assert climbs == [], "imports that climb back up a layer or across to a sibling:\n" + "\n".join(climbs)


@pytest.mark.parametrize("low", ["model", "system", "capture", "decode", "analysis"])
def test_the_lower_stages_never_import_render_pipeline_or_cli(low):
    """The issue's rule, stated on its own: decoding and analysis never import a renderer."""
    for path in (PACKAGE / low).rglob("*.py"):
        for line, target in imported(path):
            assert target[:1] not in (["render"], ["pipeline"], ["cli"]), f"{path}:{line} imports {target}"


def test_the_layer_check_sees_a_climb():
    """The checker itself: lazy relative and absolute imports are resolved to their layer."""
    fake = PACKAGE / "decode" / "x.py"
    source = (
        "def f():\n    from ..render import report\n    from . import pool\n"
        "    import iket_cli.pipeline.jobs\n"
    )
    found = imported(fake, source)
    assert found == [(2, ["render"]), (3, ["decode", "pool"]), (4, ["pipeline", "jobs"])]
    assert [c.split(" imports ")[1] for c in climbs_in(fake, source)] == ["render", "pipeline.jobs"]


@pytest.mark.parametrize(
    ("home", "planted", "climbs"),
    [
        ("decode", "from ..capture import plan", True),  # a sibling
        ("analysis", "from ..decode import tasks", True),  # a sibling
        ("system", "from ..capture import plan", True),  # up a layer
        ("model", "from ..system import spawn", True),  # up a layer
        ("capture", "from ..system import spawn\nfrom ..model import trace", False),
        ("render", "from ..capture import events\nfrom ..analysis import stages", False),
    ],
)
def test_the_layer_rule_is_the_real_graph(home, planted, climbs):
    """model ← system ← {capture, decode, analysis} ← render ← pipeline ← cli, on planted imports."""
    assert bool(climbs_in(PACKAGE / home / "x.py", planted)) == climbs


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_400_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines: split it by concern"


#: capture/ by engine: each a package of its own beside the modules they share.
ENGINES = ("two_pass", "saved_calls", "in_process")


def test_capture_is_laid_out_by_engine():
    capture = PACKAGE / "capture"
    for engine in ENGINES:
        assert (capture / engine / "__init__.py").is_file(), f"capture/{engine}/ is an engine package"
        assert ast.get_docstring(ast.parse((capture / engine / "__init__.py").read_text())), engine
    folders = {p.name for p in capture.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert folders == {*ENGINES, "_hook"}, "a new folder in capture/ is an engine: add it here"
    in_process = [
        ".".join(target)
        for path in (capture / "in_process").glob("*.py")
        for _, target in imported(path)
        if target[:2] == ["capture", "two_pass"]
    ]
    assert in_process == [], "the in-process engine runs no run-iket pass"


def test_every_stage_says_its_concern():
    for stage in LAYERS:
        init = PACKAGE / stage / "__init__.py"
        if init.exists():
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc and len(doc.splitlines()) >= 2, f"{init} needs a docstring naming its concern"


@pytest.mark.parametrize("name", STANDALONE)
def test_standalone_scripts_import_nothing_of_iket(name):
    assert imported(PACKAGE / name) == []


def module_of(parts: list[str]) -> str | None:
    """The module file (dotted below ``iket_cli``) that ``parts`` names, or None (not iket's)."""
    while parts:
        base = PACKAGE.joinpath(*parts)
        if base.with_suffix(".py").is_file():
            return ".".join(parts)
        if (base / "__init__.py").is_file():
            return ".".join([*parts, "__init__"])
        parts = parts[:-1]  # a name defined in a module
    return None


def edges(path: Path, source: str | None = None) -> set[str]:
    """The modules ``path`` imports, each ``from M import a, b`` also read as the submodules
    ``M.a`` and ``M.b`` where they are modules (TYPE_CHECKING imports count: they tie the
    code as surely)."""
    text = path.read_text(encoding="utf-8") if source is None else source
    package = dotted(path) if path.name == "__init__.py" else dotted(path)[:-1]
    found = {module_of(target) for _, target in imported(path, source)}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            for alias in node.names:
                sub = [*base, *node.module.split("."), alias.name]
                if PACKAGE.joinpath(*sub).with_suffix(".py").is_file():
                    found.add(".".join(sub))
    return {name for name in found if name}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    group.append(top)
                    if top == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def graph_of(planted: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Every module's imports of iket's modules; ``planted``: sources read instead of the files."""
    planted = planted or {}
    graph = {}
    for path in modules():
        name = ".".join(dotted(path) + (["__init__"] if path.name == "__init__.py" else []))
        graph[name] = edges(path, planted.get(name)) - {name}
    return graph


def test_no_modules_import_each_other_in_a_circle():
    """Within a stage too: a circle (TYPE_CHECKING imports included) makes two modules one
    concern that reads as two."""
    found = circles(graph_of())
    assert found == [], "modules that import each other in a circle:\n" + "\n".join(map(" <-> ".join, found))


def test_the_circle_check_sees_a_planted_circle():
    """A lazy import of the pool from the decoder closes a circle (the pool imports the decoder)."""
    source = (PACKAGE / "decode" / "decoder.py").read_text(encoding="utf-8")
    planted = source + "\n\ndef _planted():\n    from .pool import run\n"
    found = circles(graph_of({"decode.decoder": planted}))
    assert any({"decode.decoder", "decode.pool"} <= set(group) for group in found), found
