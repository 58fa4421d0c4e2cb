from pathlib import Path

import pytest

from iket_cli.capture import targets
from iket_cli.capture.targets import Target
from iket_cli.errors import TargetError


def resolve(target: Target, cwd: Path) -> Target:
    import sys

    return targets.resolve(target, cwd=cwd, python=sys.executable, env={"PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize(
    ("kind", "words", "expected"),
    [
        ("positional", ["a.py", "1"], Target("script", "a.py", ("1",))),
        ("positional", ["a.py:work"], Target("function", "a.py:work", ())),
        ("positional", ["pkg.mod:work", "x"], Target("function", "pkg.mod:work", ("x",))),
        ("positional", ["C:odd-name"], Target("script", "C:odd-name", ())),
        ("module", ["pkg.mod", "--flag"], Target("module", "pkg.mod", ("--flag",))),
        ("command", ["torchrun", "--nnodes", "2"], Target("command", "torchrun", ("--nnodes", "2"))),
    ],
)
def test_parse_forms(kind, words, expected):
    assert targets.parse(kind, words) == expected


def test_parse_without_words_names_the_forms():
    with pytest.raises(TargetError, match="no target") as info:
        targets.parse("positional", [])
    assert "-m module" in info.value.hint


@pytest.mark.parametrize(
    ("target", "stem"),
    [
        (Target("script", "/x/profile_affine.py"), "profile_affine"),
        (Target("function", "/x/profile_affine.py:workload"), "profile_affine"),
        (Target("function", "pkg.mod:workload"), "mod"),
        (Target("module", "pkg.sub"), "sub"),
        (Target("command", "/usr/bin/torchrun"), "torchrun"),
    ],
)
def test_stem(target, stem):
    assert target.stem == stem


def test_script_must_exist(tmp_path):
    with pytest.raises(TargetError, match="does not exist"):
        resolve(Target("script", "missing.py"), tmp_path)
    (tmp_path / "d.py").mkdir()
    with pytest.raises(TargetError, match="is a directory"):
        resolve(Target("script", "d.py"), tmp_path)


def test_script_resolves_against_cwd(tmp_path):
    (tmp_path / "w.py").write_text("pass\n")
    assert resolve(Target("script", "w.py", ("a",)), tmp_path) == Target(
        "script", str(tmp_path / "w.py"), ("a",)
    )


SOURCE = """
import os
from math import sqrt as root
CONSTANT = 3
made = make()
def work():
    pass
class Job:
    pass
if os.environ.get("X"):
    def maybe():
        pass
"""


@pytest.mark.parametrize("name", ["work", "Job", "root", "made", "maybe"])
def test_function_that_may_be_callable_is_accepted(tmp_path, name):
    (tmp_path / "w.py").write_text(SOURCE)
    resolved = resolve(Target("function", f"w.py:{name}"), tmp_path)
    assert resolved.spec == f"{tmp_path / 'w.py'}:{name}"


def test_missing_function_is_refused(tmp_path):
    (tmp_path / "w.py").write_text(SOURCE)
    with pytest.raises(TargetError, match="has no function 'nope'"):
        resolve(Target("function", "w.py:nope"), tmp_path)


def test_non_callable_is_refused(tmp_path):
    (tmp_path / "w.py").write_text(SOURCE)
    with pytest.raises(TargetError, match="is not callable"):
        resolve(Target("function", "w.py:CONSTANT"), tmp_path)


def test_syntax_error_is_reported_with_line(tmp_path):
    (tmp_path / "w.py").write_text("def work(:\n")
    with pytest.raises(TargetError, match="line 1"):
        resolve(Target("function", "w.py:work"), tmp_path)


def test_module_function_found_without_running_package_code(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('package code must not run')\n")
    (pkg / "mod.py").write_text("def work():\n    pass\n")
    assert resolve(Target("function", "pkg.mod:work"), tmp_path).spec == "pkg.mod:work"
    with pytest.raises(TargetError, match="has no function"):
        resolve(Target("function", "pkg.mod:other"), tmp_path)
    with pytest.raises(TargetError, match="module pkg.nope not found"):
        resolve(Target("function", "pkg.nope:work"), tmp_path)
    assert resolve(Target("module", "pkg.mod"), tmp_path) == Target("module", "pkg.mod")
    with pytest.raises(TargetError, match="module nothere not found"):
        resolve(Target("module", "nothere"), tmp_path)


def test_command_lookup(tmp_path):
    assert resolve(Target("command", "sh", ("-c", "true")), tmp_path).spec == "sh"
    with pytest.raises(TargetError, match="not found on PATH"):
        resolve(Target("command", "no-such-program-iket"), tmp_path)
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(TargetError, match="is not executable"):
        resolve(Target("command", "./run.sh"), tmp_path)
    script.chmod(0o755)
    assert resolve(Target("command", "./run.sh"), tmp_path).spec == str(script)


def test_workload_argv_always_goes_through_the_shim():
    for target in (
        Target("script", "/a.py"),
        Target("function", "/a.py:f"),
        Target("module", "m"),
        Target("command", "sh"),
    ):
        argv = target.workload_argv("py")
        assert argv[:2] == ["py", str(targets.SHIM)]
    assert Target("module", "m", ("1",)).workload_argv("py")[2:] == ["exec", "py", "-m", "m", "1"]
