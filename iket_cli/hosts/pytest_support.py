"""What iket's pytest plugin (``iket_pytest.py``, loaded by pytest) does once a test asks for
it: the test inside a window, its capture kept, its ranges gated.

* A marked test (``@pytest.mark.iket``, or every test with ``--iket-all``) runs inside
  :func:`iket_cli.window`; the capture goes to ``--iket DIR``'s ``<test id>/`` (else to
  ``iket/`` in pytest's own base temporary folder, which pytest rotates as it does
  ``tmp_path``'s: later runs remove it). Where no session can run (no GPU driver, no
  run-iket) the test is skipped with the reason, never failed by the plugin.
* Gates: ``@pytest.mark.iket(max={"mainloop": "5us"}, p50={...})``, against the pooled
  instances of each range (:meth:`iket_cli.pipeline.capture.Capture.range`); ``--iket-baseline
  DIR --iket-fail-over 5%`` compares with the same test's capture in DIR by ``iket diff``'s
  one verdict (:func:`iket_cli.analysis.gate.verdict`), its table in the failure report.
* Each range's figures go to the test's JUnit properties (``iket.<range>.p50_ns``, ...).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from ..errors import IketError
from ..model.units import duration, parse_duration
from ..pipeline.capture import Capture
from ..pipeline.window import Window

#: The mark's gates: the statistic each limits.
GATES = ("max", "p50", "p90", "p99", "mean", "min")
#: Figures put in the JUnit report, per range.
REPORTED = ("count", "p50", "p90", "max")


def unavailable(library: str | None = None) -> str | None:
    """Why no IKET session can run here (None: one can): the library's own load error."""
    from ..capture import session

    try:
        session.load(session.find_library(library))
    except IketError as error:
        return f"iket: no IKET session here: {error.message}"
    return None


def folder_for(item: pytest.Item, part: str | None = None) -> Path:
    """``--iket DIR``'s folder for the test (``<test id>``, a name of its own per window)."""
    kept = item.config.getoption("iket")
    root = Path(kept) if kept else _pytest_temp(item.config)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", item.nodeid).strip("-")
    return root / (f"{name}-{part}" if part else name)


def _pytest_temp(config: pytest.Config) -> Path:
    """``iket/`` in this run's base temporary folder (``tmp_path``'s parent): pytest keeps the last
    few runs' and removes older ones, so a run without ``--iket`` leaves nothing for good.
    (``config._tmp_path_factory`` is what pytest's own ``tmp_path_factory`` fixture returns.)"""
    return config._tmp_path_factory.getbasetemp() / "iket"


def around(item: pytest.Item) -> Generator[None, Any, Any]:
    """The test inside a window, then its gates (a pytest hook wrapper's body)."""
    marker = item.get_closest_marker("iket")
    options = dict(marker.kwargs) if marker else {}
    gates = {stat: options.pop(stat) for stat in GATES if stat in options}
    reason = unavailable(options.get("library"))
    if reason:
        pytest.skip(reason)
    window = Window(folder_for(item), clobber=True, **options)
    with opened(window):
        result = yield
    judge(item, window.capture, gates)
    return result


def opened(window: Window) -> contextlib.ExitStack:
    """``window`` entered (leaving the stack leaves it), or the test failed with iket's words
    where it cannot open (a second window in this process, say:
    :data:`iket_cli.pipeline.window.AGAIN_ENV`), no traceback."""
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(window)
    except IketError as error:
        hint = f" ({error.hint})" if error.hint else ""
        pytest.fail(f"iket: {error.message}{hint}", pytrace=False)
    return stack


def judge(item: pytest.Item, capture: Capture | None, gates: dict[str, dict]) -> None:
    """Report the capture's figures, then fail the test on a gate it does not pass."""
    if capture is None:
        return
    rows = capture.ranges()
    for row in rows:
        for stat in REPORTED:
            item.user_properties.append(
                (f"iket.{row['range']}.{stat}{'' if stat == 'count' else '_ns'}", row[stat])
            )
    item.user_properties.append(("iket.capture", str(capture.output_dir)))
    failed = _limits(capture, gates) + _baseline(item, capture)
    if failed:
        pytest.fail("\n".join(failed), pytrace=False)


def _limits(capture: Capture, gates: dict[str, dict]) -> list[str]:
    lines, over = [], 0
    for stat, limits in gates.items():
        for name, limit in dict(limits).items():
            measured = getattr(capture.range(name), stat)
            bound = parse_duration(limit)
            ok = measured <= bound
            over += not ok
            said = "ok" if ok else "OVER"
            lines.append(f"  {name:<20} {stat:<5} {duration(bound):>10} {duration(measured):>10}  {said}")
    if not over:
        return []
    head = f"iket gate: {over} of {len(lines)} limit(s) exceeded ({capture.output_dir})"
    return [head, f"  {'range':<20} {'stat':<5} {'limit':>10} {'measured':>10}", *lines]


def _baseline(item: pytest.Item, capture: Capture) -> list[str]:
    root = item.config.getoption("iket_baseline")
    if not root:
        return []
    from ..analysis import diff, gate
    from ..model.reading import open_capture
    from ..render import formats

    base = Path(root) / folder_for(item).name
    if not (base / "manifest.json").is_file():
        return [f"iket: no baseline capture of this test in {root} (record one: pytest --iket {root})"]
    fail_over = item.config.getoption("iket_fail_over")
    changes = diff.compare(open_capture(base), open_capture(capture.output_dir), fail_over=fail_over)
    failed = gate.verdict(changes, fail_over, unmatched_fails=True)
    if failed is None:
        return []
    table = io.StringIO()
    formats.write("diff", diff.Compared(changes, "median"), "table", table)
    return [f"iket: {failed.message}" + (f" ({failed.hint})" if failed.hint else ""), table.getvalue()]


class Opener:
    """The ``iket_window`` fixture's value: ``opener(fn)`` -> ``Capture``, or ``with opener():``."""

    def __init__(self, item: pytest.Item) -> None:
        self.item = item
        self.count = 0

    def __call__(self, fn: Any = None, **options: Any) -> Any:
        reason = unavailable(options.get("library"))
        if reason:
            pytest.skip(reason)
        self.count += 1
        window = Window(
            folder_for(self.item, str(self.count) if self.count > 1 else None), clobber=True, **options
        )
        if fn is None:
            return window
        with opened(window):
            fn()
        judge(self.item, window.capture, {})
        return window.capture
