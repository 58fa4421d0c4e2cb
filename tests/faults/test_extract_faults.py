"""``--extract``'s options as a careless user gives them, through the real CLI and ``iket.toml``
(issue 50: R3-10 call ranges, R3-11 what FUNC may be, R3-18 configuration footguns). Each is
refused before anything runs: exit 2, one line, nothing written."""

from __future__ import annotations

import time

import pytest

from conftest import profile_double, replay, run_iket

KERNELS = """
import functools


def launch(a, b):
    b[:] = a * 2
    return b


class Model:
    @property
    def size(self):
        return 3

    @functools.cached_property
    def cached(self):
        return 4

    def step(self, a):
        return a
"""
MODEL = "import numpy as np, kernels\nkernels.launch(np.arange(8.0), np.zeros(8))\nprint('model ran')\n"


@pytest.fixture
def work(tmp_path):
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    return tmp_path


def refused(result, said: str) -> None:
    assert result.code == 2, result
    assert "Traceback" not in result.stdout + result.stderr, result
    errors = [line for line in result.stderr.splitlines() if line.startswith("iket: error:")]
    assert len(errors) == 1 and said in errors[0], result


def profile(double, work, *args):
    return profile_double(double, work, *args, timeout=60)


@pytest.mark.parametrize(
    ("calls", "said"),
    [
        ("3-99999999999999999999", "is not N, A-B or last"),
        ("1-1000000000", "would save 1,000,000,000 calls; iket saves at most 1,000"),
        ("1-100000", "would save 100,000 calls"),
        ("0", "is not N, A-B or last"),
        ("99999999999999999999", "is not N, A-B or last"),
    ],
)
def test_call_ranges_are_bounded(double, work, calls, said):
    started = time.monotonic()
    result = profile(double, work, "model.py", "--extract", "kernels:launch", "--calls", calls, "-o", "cap")
    refused(result, said)
    assert time.monotonic() - started < 30 and not (work / "cap").exists()


@pytest.mark.parametrize(
    ("function", "said"),
    [
        ("kernels:Model", "is a class, not a function"),
        ("kernels:Model.size", "is a property"),
        ("kernels:Model.cached", "is a property"),
        ("json:dump", "is Python's standard library"),
        ("os.path:join", "is Python's standard library"),
        ("passwd:root", "module passwd not found"),
        ("./passwd:root", "is not a Python file"),
    ],
)
def test_what_is_not_a_function_of_the_workload_is_refused(double, work, function, said):
    result = profile(double, work, "model.py", "--extract", function, "-o", "cap")
    refused(result, said)
    assert not (work / "cap").exists() and not (work / "cap.failed").exists()


CONFIG = 'output = "runs"\nrun_iket = "{double}"\n[[jobs]]\nname = "k"\ntarget = "model.py"\n{extra}\n'


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('extract = "kernels:launch"\ncalls = "3-99999999999999999999"', "jobs[0].calls: --calls"),
        ('extract = "kernels:launch"\ncalls = 0', "jobs[0].calls: --calls '0' is not N, A-B or last"),
        ('extract = "kernels:launch"\nmax_extract = -5', "jobs[0].max_extract: -5 is not a size"),
        ('extract = "kernels:launch"\nmax_extract = "-5M"', "jobs[0].max_extract"),
        ('extract = ""', "jobs[0].extract: '' names no function"),
        ('extract = "  "', "jobs[0].extract: '' names no function"),
    ],
)
def test_a_configuration_s_extract_options_are_checked_before_any_job(double, work, extra, said):
    (work / "iket.toml").write_text(CONFIG.format(double=double, extra=extra))
    result = run_iket("run", cwd=work, env=replay("affine"), timeout=60)
    refused(result, said)
    assert not (work / "runs").exists()


def test_the_api_refuses_an_empty_extract(double, work, monkeypatch):
    import iket_cli

    monkeypatch.chdir(work)
    with pytest.raises(iket_cli.IketError) as refused_error:
        iket_cli.profile("model.py", "api", extract="", run_iket=str(double))
    assert refused_error.value.exit_code == 2 and "names no function" in str(refused_error.value)
    with pytest.raises(iket_cli.IketError) as negative:
        iket_cli.profile("model.py", "api", extract="kernels:launch", max_extract=-5, run_iket=str(double))
    assert negative.value.exit_code == 2 and "is not a size" in str(negative.value)


def test_wait_pattern_footguns(harness):
    import shutil

    from conftest import FIXTURES

    shutil.copytree(FIXTURES / "cute_pipeline", harness.work / "pipe")
    everything = harness.run("show", "pipe", "--pipeline", "--wait-pattern", "*")
    harness.check(everything, 2, "matches every range, so no stage does any work")
    alone = harness.run("show", "pipe", "--wait-pattern", "load*")
    harness.check(alone, 2, "--wait-pattern needs --pipeline")


BIG_MODEL = "import numpy as np, kernels\nkernels.launch(np.zeros(1 << 20), np.zeros(1 << 20))\n"


def test_a_full_disk_in_the_record_run_is_said_so(double, work, small_disk):
    """R3-12: the saved calls fill the disk: not "cannot be saved" (2), the full disk (1)."""
    (work / "big.py").write_text(BIG_MODEL)
    result = profile(double, work, "big.py", "--extract", "kernels:launch", "-o", small_disk / "cap")
    assert result.code == 1 and "Traceback" not in result.stderr, result
    errors = [line for line in result.stderr.splitlines() if line.startswith("iket: error:")]
    assert len(errors) == 1 and "no space left on the disk holding" in errors[0], result
    assert "cannot be saved" not in result.stderr


def test_a_full_disk_in_the_replay_copy_is_said_so(double, work, small_disk):
    (work / "big.py").write_text(BIG_MODEL)
    assert profile(double, work, "big.py", "--extract", "kernels:launch", "-o", "xc").code == 0
    result = profile(double, work, "--replay", "xc", "-o", small_disk / "again")
    assert result.code == 1 and "Traceback" not in result.stderr, result
    errors = [line for line in result.stderr.splitlines() if line.startswith("iket: error:")]
    assert len(errors) == 1 and "no space left on the disk holding" in errors[0], result
    assert "shutil.Error" not in result.stderr and "writing the saved calls" in errors[0]
