"""A marked test run in a child process of its own (``pytest --iket-isolate``), as
pytest-forked and pytest-isolate run theirs, but spawned, never forked (CUDA does not survive a
fork): where NVIDIA's in-process session can kill its process, a crash fails that test alone,
its signal named, and the run goes on.

The parent starts ``python -m pytest NODEID`` with the run's root, ini file, plugins and iket
options, and ``--iket-child FILE``: the child runs the one test (its window, gates and capture as
in-process), writes each of its reports to FILE as one JSON line (pytest's own
``pytest_report_to_serializable``), and the parent logs them as its own: outcome, gate table,
JUnit properties, captured output. A child that dies before its last report is reported as a
failure of the test that names the signal; what it printed is kept in the report."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ..system.signals import ended_by

#: The child's option: where it writes its reports.
CHILD_OPTION = "--iket-child"
#: iket's own options the child gets as the parent was given them.
PASSED_ON = ("iket", "iket_all", "iket_baseline", "iket_fail_over")


def wanted(asked: bool, windows: int) -> bool:
    """Whether a test that opens a window runs in a child: where asked, or where the run opens
    more than one window and a later window kills its process with the installed run-iket
    (:mod:`~iket_cli.model.runiket_facts`; ``IKET_CLI_SESSION_WINDOWS=1`` says so of a machine)."""
    from ..model import runiket_facts

    if asked:
        return True
    return windows > 1 and runiket_facts.installed().more_windows_risky()


def run(item: pytest.Item) -> None:
    """Run ``item`` in a child and log its reports here (the ``pytest_runtest_protocol`` body)."""
    from ..system import spawn

    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    with tempfile.TemporaryDirectory(prefix="iket-isolate-") as folder:
        reports = Path(folder) / "reports.jsonl"
        proc = spawn.start(_argv(item, reports), cwd=item.config.invocation_params.dir,
                           stdout=spawn.PIPE, stderr=spawn.STDOUT, text=True, new_session=True)  # fmt: skip
        try:
            said, _ = spawn.output(proc, None)
        except BaseException:  # Ctrl-C: the child goes too
            spawn.kill_group(proc)
            raise
        logged = _replay(item, reports)
    if proc.returncode != 0 and not any(r.when == "teardown" for r in logged):
        report = _crashed(item, proc.returncode, said, logged)
        kept = _evidence(item, ended_by(proc.returncode))
        if kept is not None:
            report.sections.append(("iket", f"the window's evidence is kept in {kept}"))
        ihook.pytest_runtest_logreport(report=report)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _argv(item: pytest.Item, reports: Path) -> list[str]:
    """The child's pytest: this run's root, ini file and plugins, iket's options, one test."""
    config = item.config
    argv = [sys.executable, "-m", "pytest", item.nodeid, "-q", "-p", "no:cacheprovider",
            "--rootdir", str(config.rootpath), f"{CHILD_OPTION}={reports}"]  # fmt: skip
    argv += ["-c", str(config.inipath)] if config.inipath else []
    given = list(config.invocation_params.args)
    for index, word in enumerate(given):  # plugins named on the command line (-p NAME, -pNAME)
        if word == "-p" and index + 1 < len(given):
            argv += ["-p", str(given[index + 1])]
        elif word.startswith("-p") and len(word) > 2:
            argv.append(word)
    for name in PASSED_ON:
        value = config.getoption(name)
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value not in (None, False):
            argv.append(f"{flag}={value}")
    from .pytest_support import folder_for, folder_name

    if not config.getoption("iket"):  # the parent's rotated folder, not the child's own
        argv.append(f"--iket={folder_for(item).parent}")
    # its temporary folder inside this run's: a child's own would rotate this run's away
    basetemp = config._tmp_path_factory.getbasetemp() / "iket-children" / folder_name(item.nodeid)
    argv.append(f"--basetemp={basetemp}")
    return argv


def _replay(item: pytest.Item, reports: Path) -> list[Any]:
    """The child's reports, logged here as this run's own."""
    logged = []
    try:
        lines = reports.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a line the child did not finish writing
        report = item.config.hook.pytest_report_from_serializable(config=item.config, data=data)
        if report is not None:
            item.ihook.pytest_runtest_logreport(report=report)
            logged.append(report)
    return logged


def _crashed(item: pytest.Item, returncode: int, said: str, logged: list[Any]) -> pytest.TestReport:
    """The failure of a test whose child died before its last report."""
    what = ended_by(returncode)
    where = "before its test ran" if not logged else f"after its {logged[-1].when}"
    text = (
        f"iket: the test's own process (--iket-isolate) died {where}: {what}. "
        "A signal there is NVIDIA's in-process session or the workload; the rest of the run goes on."
    )
    report = pytest.TestReport(item.nodeid, item.location, {}, "failed", text, "call" if logged else "setup",
                               user_properties=[("iket.crashed", what)])  # fmt: skip
    if said.strip():
        report.sections.append(("captured output of the test's process", said[-20000:]))
    return report


def _evidence(item: pytest.Item, what: str) -> Path | None:
    """What the dead child's window left (its staging folder), kept as ``DIR.failed/``."""
    from ..errors import IketError
    from ..pipeline.window_finish import died
    from .pytest_support import folder_for

    try:
        return died(folder_for(item), f"the test's process died with {what} inside its window")
    except (IketError, OSError):
        return None  # kept as it is: the next window into this folder cleans it


class ChildReports:
    """In the child: each report of the one test, written as it is made (a crash later keeps
    what was written)."""

    def __init__(self, config: pytest.Config, path: str) -> None:
        self.config, self.path = config, path

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(data) + "\n")
