"""One dispatch from --format to the writer of a reading command's value (render/formats.py)."""

import importlib
import io

import pytest

from iket_cli.analysis.diff import Compared
from iket_cli.analysis.lint import Linted
from iket_cli.model.vocab import DIFF_FORMATS, LINT_FORMATS, SHOW_FORMATS, SQL_FORMATS
from iket_cli.render import formats

#: Each kind a reading command writes, and the --format choices its command offers.
OFFERED = {
    "summary": SHOW_FORMATS,
    "payloads": SHOW_FORMATS,
    "pipeline": SHOW_FORMATS,
    "lint": LINT_FORMATS,
    "diff": DIFF_FORMATS,
    "results": SQL_FORMATS,
}


@pytest.mark.parametrize("kind", sorted(OFFERED))
def test_every_offered_format_has_a_writer(kind):
    module, table = formats.ELSEWHERE.get(kind, (kind, "WRITERS"))
    writers = getattr(importlib.import_module(f"iket_cli.render.{module}"), table)
    assert set(writers) == set(OFFERED[kind])


def test_a_value_is_written_in_each_format():
    linted = [Linted("0x1", "a.trace.json", [])]
    text = io.StringIO()
    formats.write("lint", linted, "text", text)
    assert text.getvalue() == "iket: no instrumentation problem found\n"
    as_json = io.StringIO()
    formats.write("lint", linted, "json", as_json)
    assert '"process": "0x1"' in as_json.getvalue()
    table = io.StringIO()
    formats.write("diff", Compared([], "p90"), "markdown", table)
    assert table.getvalue().startswith("| kernel | range | base p90 | new p90 |")
