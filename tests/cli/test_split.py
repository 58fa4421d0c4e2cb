import pytest

from iket_cli.cli.profile import split_workload
from iket_cli.errors import UsageError

VALUES = {"-o", "--output-dir", "--timeout", "--env"}
FLAGS = {"--clobber", "-q", "--quiet", "-h", "--help"}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["script.py", "-o", "d"], (["-o", "d"], "positional", ["script.py"])),
        (["-o", "d", "script.py", "--lr", "3"], (["-o", "d"], "positional", ["script.py", "--lr", "3"])),
        (["s.py", "-o", "d", "--", "-o", "x"], (["-o", "d"], "positional", ["s.py", "-o", "x"])),
        (["--clobber", "--", "torchrun", "-o", "x"], (["--clobber"], "command", ["torchrun", "-o", "x"])),
        (["-m", "pkg.mod", "-q", "arg"], (["-q"], "module", ["pkg.mod", "arg"])),
        (["-mpkg", "x"], ([], "module", ["pkg", "x"])),
        (["--module=pkg", "x"], ([], "module", ["pkg", "x"])),
        (["--timeout=3", "-od", "s.py"], (["--timeout=3", "-od"], "positional", ["s.py"])),
        (["--unknown", "s.py"], (["--unknown"], "positional", ["s.py"])),
        (["-q"], (["-q"], "positional", [])),
        (["s.py:work", "--env", "A=1"], (["--env", "A=1"], "positional", ["s.py:work"])),
    ],
)
def test_split(args, expected):
    assert split_workload(args, VALUES, FLAGS) == expected


def test_module_without_name():
    with pytest.raises(UsageError, match="needs a module name"):
        split_workload(["-m"], VALUES, FLAGS)
