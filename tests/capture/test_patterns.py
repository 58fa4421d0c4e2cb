import os
import re
import socket

import pytest

from iket_cli.capture import patterns
from iket_cli.errors import UsageError

from conftest import replay, run_iket


def test_codes(tmp_path):
    env = {"SLURM_PROCID": "3"}
    host = socket.gethostname().split(".")[0]
    assert patterns.expand("caps/%h-%q{SLURM_PROCID}", env=env) == f"caps/{host}-3"
    assert patterns.expand("p%p", env=env) == f"p{os.getpid()}"
    assert re.fullmatch(r"t\d{8}-\d{6}", patterns.expand("t%t", env=env))
    assert patterns.expand("100%%", env=env) == "100%"
    assert patterns.expand("plain", env=env) == "plain"


def test_next_free_number(tmp_path):
    assert patterns.expand("run-%n", env={}, base=tmp_path) == "run-1"
    (tmp_path / "run-1").mkdir()
    (tmp_path / "run-2.failed").mkdir()
    assert patterns.expand("run-%n", env={}, base=tmp_path) == "run-3"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("x%z", "unknown -o pattern %z"),
        ("x%", "a trailing %"),
        ("%q{}", "names no variable"),
        ("%q{NOT_SET_ANYWHERE}", "NOT_SET_ANYWHERE is not set"),
    ],
)
def test_errors(pattern, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        patterns.expand(pattern, env={})


def test_profile_numbers_its_runs(tmp_path, double):
    (tmp_path / "w.py").write_text("def workload():\n    pass\n")
    for expected in ("run-1", "run-2"):
        result = run_iket(
            "profile",
            "--run-iket",
            double,
            "-o",
            "caps/run-%n",
            "w.py:workload",
            cwd=tmp_path,
            env=replay("affine"),
        )
        assert result.code == 0, result
        assert (tmp_path / "caps" / expected / "manifest.json").is_file()
    bad = run_iket("profile", "--run-iket", double, "-o", "caps/%q{NOPE_X}", "w.py:workload", cwd=tmp_path)
    assert bad.code == 2 and "NOPE_X is not set" in bad.stderr
