"""pytest's iket plugin (entry point ``pytest11``): a test's kernels captured in an IKET window
(``iket_cli.window``), with gates on its ranges.

Off unless asked: a run without ``--iket``, ``--iket-all``, ``--iket-baseline`` or an ``iket``
mark only gains the options and the marker's name, and never imports ``iket_cli``; ``-p
no:iket`` removes even those. docs/pytest.md.
"""

from __future__ import annotations

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
        "--iket-fail-over",
        metavar="PCT",
        default="5%",
        help="--iket-baseline: fail a test whose ranges got slower than this (iket diff --fail-over)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "iket(max=None, p50=None, p90=None, p99=None, mean=None, **window): run the test inside an IKET "
        "window and gate its ranges ({'mainloop': '5us'}); window options as iket_cli.window's",
    )
    if config.getoption("iket") or config.getoption("iket_all") or config.getoption("iket_baseline"):
        # before collection: kernels compiled at a test module's import load outside run-iket
        import iket_cli

        iket_cli.prepare()


def _wanted(item: pytest.Item) -> bool:
    config = item.config
    asked = config.getoption("iket_all") or config.getoption("iket_baseline")
    return item.get_closest_marker("iket") is not None or bool(asked)


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
