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

import hashlib
import io
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from ..errors import IketError, UsageError
from ..model.units import duration
from ..pipeline.capture import Capture
from ..pipeline.window import Window
from . import pytest_marks as marks

#: Figures put in the JUnit report, per range.
REPORTED = ("count", "p50", "p90", "max")


def unavailable(library: str | None = None) -> str | None:
    """Why no IKET session can run here (None: one can): the library's own load error."""
    from ..capture.in_process import session

    try:
        session.load(session.find_library(library))
    except IketError as error:
        return f"iket: no IKET session here: {error.message}"
    return None


def folder_for(item: pytest.Item, part: str | None = None) -> Path:
    """``--iket DIR``'s folder for the test (``<test id>``, a name of its own per window)."""
    kept = item.config.getoption("iket")
    root = Path(kept) if kept else _pytest_temp(item.config)
    return root / (f"{folder_name(item.nodeid)}-{part}" if part else folder_name(item.nodeid))


def folder_name(nodeid: str) -> str:
    """The test's folder: its node id with ``/``, ``::``, ``[`` and ``]`` made ``-``; an id with
    any other character a file name cannot keep gets a short hash of itself too, so that two ids
    made alike (``test_p[a b]``, ``test_p[a-b]``) never share a folder."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", nodeid).strip("-")
    if re.search(r"[^A-Za-z0-9_.\-/:\[\]]", nodeid):
        name += "-" + hashlib.sha1(nodeid.encode()).hexdigest()[:8]
    return name


def _pytest_temp(config: pytest.Config) -> Path:
    """``iket/`` in this run's base temporary folder (``tmp_path``'s parent): pytest keeps the last
    few runs' and removes older ones, so a run without ``--iket`` leaves nothing for good.
    (``config._tmp_path_factory`` is what pytest's own ``tmp_path_factory`` fixture returns.)"""
    return config._tmp_path_factory.getbasetemp() / "iket"


def around(item: pytest.Item) -> Generator[None, Any, Any]:
    """The test inside a window, then its gates (a pytest hook wrapper's body). What iket cannot
    do fails the test with one line in iket's words (:func:`refused`), never a traceback."""
    marker = item.get_closest_marker("iket")
    try:
        request = marks.asked(marker.args if marker else (), dict(marker.kwargs) if marker else {})
    except IketError as error:
        refused(error)
    reason = unavailable(request.options.get("library"))
    if reason:
        pytest.skip(reason)
    try:
        window = Window(folder_for(item), clobber=True, **request.options)
    except IketError as error:
        refused(error)
    if request.function is None:
        result = yield from _whole(item, window)
    else:
        result = yield from _calls(request, window)
    judge(item, window.capture, request.gates)
    return result


def _whole(item: pytest.Item, window: Window) -> Generator[None, Any, Any]:
    """The whole test in ``window``."""
    entered(window)
    try:
        result = yield
    except BaseException as error:  # the test's own failure goes on; the window keeps its evidence
        _leave(item, window, error)
        raise
    _leave(item, window, None)
    return result


def _calls(request: marks.Asked, window: Window) -> Generator[None, Any, Any]:
    """Only ``request.function``'s chosen calls made by the test in ``window``."""
    from .calls import windowed_calls

    try:
        with windowed_calls(request.function, request.calls, window) as chosen:
            result = yield
    except IketError as error:  # the window refused inside the call (it came up through the test)
        refused(error)
    if not chosen.opened:
        refused(UsageError(f"{request.function} was called {chosen.seen} time(s) in the test; "
                           f"calls={request.calls!r} needs more"))  # fmt: skip
    return result


def refused(error: IketError) -> None:
    """Fail the test with iket's one line (and its hint), no traceback."""
    hint = f" ({error.hint})" if error.hint else ""
    pytest.fail(f"iket: {error.message}{hint}", pytrace=False)


def entered(window: Window) -> None:
    """``window`` entered, or the test failed in iket's words where it cannot open."""
    try:
        window.__enter__()
    except IketError as error:
        refused(error)


def _leave(item: pytest.Item, window: Window, error: BaseException | None) -> None:
    """``window`` left; where leaving fails (the session refused Stop, a full disk), the test
    fails in iket's words, or, where the test already failed, iket's words join its report."""
    try:
        window.__exit__(type(error) if error else None, error, None)
    except IketError as failure:
        if error is None:
            refused(failure)
        item.add_report_section("call", "iket", f"iket: {failure.message}")


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
    lost = _lost(capture)
    if lost:
        item.user_properties.append(("iket.incomplete", lost))
    gated = bool(gates) or bool(item.config.getoption("iket_baseline"))
    failed = _limits(capture, gates) + _baseline(item, capture)
    if gated and lost:  # a gate never passes on numbers that miss what IKET lost
        failed = [f"iket: the gate cannot pass: this capture is {lost}", *failed]
    if failed:
        pytest.fail("\n".join(failed), pytrace=False)


def _lost(capture: Capture) -> str | None:
    """The capture's INCOMPLETE line (None: complete, or not known to be incomplete)."""
    from ..analysis import judged
    from ..model.reading import open_capture

    found = judged.judge(open_capture(capture.output_dir))
    return found.line if found.state == judged.INCOMPLETE else None


def _limits(capture: Capture, gates: dict[str, dict[str, float]]) -> list[str]:
    """The gate table where a limit is exceeded or names a range the capture does not hold."""
    lines, over = [], 0
    names = sorted({row["range"] for row in capture.ranges()})
    for stat, limits in gates.items():
        for name, bound in limits.items():
            if name not in names:
                over += 1
                lines.append(f"  {name:<20} {stat:<5} {duration(bound):>10} {'-':>10}  NO SUCH RANGE")
                continue
            measured = getattr(capture.range(name), stat)
            ok = measured <= bound
            over += not ok
            said = "ok" if ok else "OVER"
            lines.append(f"  {name:<20} {stat:<5} {duration(bound):>10} {duration(measured):>10}  {said}")
    if not over:
        return []
    missing = sum("NO SUCH RANGE" in line for line in lines)
    said = "exceeded" if not missing else "exceeded or not found" if missing < over else "not found"
    head = f"iket gate: {over} of {len(lines)} limit(s) {said} ({capture.output_dir})"
    known = [f"  the capture's ranges: {', '.join(names) or 'none'}"] if missing else []
    return [head, f"  {'range':<20} {'stat':<5} {'limit':>10} {'measured':>10}", *lines, *known]


def _baseline(item: pytest.Item, capture: Capture) -> list[str]:
    root = item.config.getoption("iket_baseline")
    if not root:
        return []
    from ..analysis import diff, gate, judged
    from ..model.reading import open_capture
    from ..render import formats

    base = Path(root) / folder_for(item).name
    if not (base / "manifest.json").is_file():
        return [f"iket: no baseline capture of this test in {root} (record one: pytest --iket {root})"]
    fail_over = item.config.getoption("iket_fail_over")
    try:
        baseline = open_capture(base)
        found = judged.judge(baseline)
        if found.state == judged.INCOMPLETE:
            return [f"iket: the gate cannot pass: the baseline ({base}) is {found.line}"]
        changes = diff.compare(baseline, open_capture(capture.output_dir), fail_over=fail_over)
    except IketError as error:  # a damaged baseline: said, the test failed
        return [f"iket: the baseline {base} cannot be read: {error.message}"]
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
        try:
            window = Window(
                folder_for(self.item, str(self.count) if self.count > 1 else None), clobber=True, **options
            )
        except IketError as error:
            refused(error)
        if fn is None:
            return window
        entered(window)
        try:
            fn()
        except BaseException as error:
            _leave(self.item, window, error)
            raise
        _leave(self.item, window, None)
        judge(self.item, window.capture, {})
        return window.capture
