"""Fuzzed inputs for show, diff, report and lint: random JSON values, and real H200 traces with
one value replaced or removed, written both compactly (the numpy reader's layout) and
pretty-printed (the general reader's). Whatever they are fed, the commands end with exit 0,
1 or 2 and never a traceback.

The CLI runs in this process through its real entry point (``iket_cli.cli.main``), so an
exception iket does not turn into a message escapes and fails the test. The last test runs
``scripts/fuzz_battery.py``'s cases instead: damaged manifests, traces, Perfetto traces and
raw captures through every command, each in a forked child under ``RLIMIT_AS``, so that a
decoder that aborts or a runaway allocation ends the child, not pytest
(``IKET_FUZZ_CASES``, default 48; the battery's own run of 560 is in docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iket_cli.cli import main

from conftest import FIXTURES, project_module

BATTERY = project_module("scripts", "fuzz_battery")
TRACES = [
    json.loads((FIXTURES / "affine" / "iket_pid_0x204.trace.json").read_text()),
    json.loads((FIXTURES / "multi" / "iket_pid_0x23f.trace.json").read_text()),
]
COMMANDS = st.sampled_from(
    [
        ["show"],
        ["show", "--format", "json"],
        ["show", "--format", "csv", "--by", "warp"],
        ["show", "--by", "sm", "--top", "1"],
        ["show", "--timeline"],
        ["lint", "--format", "json"],
        ["report", "-o", "{dir}/r.html"],
        ["diff", "{dir}/other.trace.json", "--fail-over", "5%"],
    ]
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
SETTINGS = settings(
    max_examples=int(os.environ.get("IKET_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as stop:
            code = stop.code
        else:  # pragma: no cover - main always exits
            code = 0
    return int(code), out.getvalue(), err.getvalue()


def check(document_text: str, command: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "x.trace.json"
        trace.write_text(document_text)
        (Path(folder) / "other.trace.json").write_text(json.dumps(TRACES[0]))
        args = [command[0], str(trace), *(word.format(dir=folder) for word in command[1:])]
        code, out, err = run_cli(args)
    assert code in (0, 1, 2), (args, code, err)
    assert "Traceback" not in out and "Traceback" not in err, err
    if code:
        assert sum(line.startswith("iket: error:") for line in err.splitlines()) == 1, err


@SETTINGS
@given(value=JSON, command=COMMANDS)
def test_any_json_value(value, command):
    check(json.dumps(value), command)


@st.composite
def mutated(draw) -> str:
    document = json.loads(json.dumps(draw(st.sampled_from(TRACES))))
    places = [p for p in BATTERY.places(document) if p]
    where = draw(st.sampled_from(places))
    parent = document
    for step in where[:-1]:
        parent = parent[step]
    if draw(st.booleans()):
        parent[where[-1]] = draw(JSON | st.integers(-(2**63), 2**63))
    elif isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent.pop(where[-1])
    if draw(st.booleans()):  # the decoder's own layout: the numpy reader takes it
        return json.dumps(document, sort_keys=True, separators=(",", ":"))
    return json.dumps(document, indent=1)


@SETTINGS
@given(text=mutated(), command=COMMANDS)
def test_a_real_trace_with_one_value_changed(text, command):
    check(text, command)


def test_damaged_captures_through_every_command_in_children(tmp_path):
    battery = BATTERY
    cases = int(__import__("os").environ.get("IKET_FUZZ_CASES", "48"))
    outcomes = battery.battery(
        cases, tmp_path, first_seed=int(__import__("os").environ.get("IKET_FUZZ_SEED", "0"))
    )
    assert {o.kind for o in outcomes} == set(battery.COMMANDS)
    bad = [o for o in outcomes if o.problem]
    assert bad == [], battery.summary(outcomes)
