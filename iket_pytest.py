"""pytest's iket plugin (entry point ``pytest11``): a test's kernels captured in an IKET window
(``iket_cli.window``), with gates on its ranges.

Off unless asked: a run without ``--iket``, ``--iket-all``, ``--iket-baseline`` or an ``iket``
mark only gains the options and the marker's name, and never imports ``iket_cli``; ``-p
no:iket`` removes even those. docs/pytest.md.
"""

from __future__ import annotations

import argparse

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("iket", "IKET in-kernel timelines (iket_cli)")
    group.addoption("--iket", metavar="DIR", help="keep each window's capture in DIR/<test id>/")
    group.addoption("--iket-all", action="store_true", help="run every test inside an IKET window")
    group.addoption(
        "--iket-baseline",
        metavar="DIR",
        help="compare each test's capture with the same test's in DIR (as iket diff does)",
    )
    group.addoption(
        "--iket-isolate",
        action="store_true",
        help="run each test that opens a window in a process of its own (a crash fails that test alone)",
    )
    group.addoption("--iket-child", metavar="FILE", help=argparse.SUPPRESS)  # the isolated test's own run
    group.addoption(
        "--iket-fail-over",
        metavar="PCT",
        default="5%",
        help="--iket-baseline: fail a test whose ranges got slower than this (iket diff --fail-over; "
        "a bare number is a fraction: 0.05 is 5%)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "iket(max=None, p50=None, p90=None, p99=None, mean=None, **window): run the test inside an IKET "
        "window and gate its ranges ({'mainloop': '5us'}); window options as iket_cli.window's",
    )
    asked = ("iket", "iket_all", "iket_baseline", "iket_isolate", "iket_child")
    if any(config.getoption(name) for name in asked):
        # before collection: kernels compiled at a test module's import load outside run-iket
        import iket_cli
        from iket_cli.analysis.diff import parse_thresholds
        from iket_cli.errors import IketError

        try:
            parse_thresholds(config.getoption("iket_fail_over"))
        except IketError as error:
            raise pytest.UsageError(f"--iket-fail-over: {error.message} ({error.hint})") from None
        iket_cli.prepare()
    if config.getoption("iket_child"):
        from iket_cli.hosts.pytest_isolate import ChildReports

        config.pluginmanager.register(ChildReports(config, config.getoption("iket_child")), "iket-child")


def _wanted(item: pytest.Item) -> bool:
    config = item.config
    asked = config.getoption("iket_all") or config.getoption("iket_baseline")
    return item.get_closest_marker("iket") is not None or bool(asked)


def _opens_window(item: pytest.Item) -> bool:
    return _wanted(item) or "iket_window" in getattr(item, "fixturenames", ())


#: How many of the run's tests open a window (counted once the tests are collected).
WINDOWS = pytest.StashKey[int]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[WINDOWS] = sum(1 for item in items if _opens_window(item))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """A test that opens a window runs in a process of its own where asked (--iket-isolate), or
    where the run opens several windows and the installed run-iket's session kills a process
    in a later one (docs/pytest.md)."""
    config = item.config
    if config.getoption("iket_child") or not _opens_window(item):
        return None
    from iket_cli.hosts import pytest_isolate

    if not pytest_isolate.wanted(config.getoption("iket_isolate"), config.stash.get(WINDOWS, 0)):
        return None
    pytest_isolate.run(item)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not _wanted(item) or "iket_window" in getattr(item, "fixturenames", ()):
        return (yield)
    from iket_cli.hosts import pytest_support

    return (yield from pytest_support.around(item))


@pytest.fixture
def iket_window(request: pytest.FixtureRequest):
    """``iket_window(fn)`` runs ``fn`` in a window and returns its ``Capture``; ``with
    iket_window() as w:`` opens one around a block (``w.capture`` after it). Skips the test
    where no IKET session can run (no GPU, no run-iket)."""
    from iket_cli.hosts import pytest_support

    return pytest_support.Opener(request.node)
