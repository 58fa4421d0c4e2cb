"""``iket run``'s CI reports name kernels as people read them: JUnit test cases and the job
page's markdown, here for a warp-trace capture gated on its launch spans."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict

from iket_cli.analysis import diff
from iket_cli.model.reading import open_capture
from iket_cli.render import ci

from conftest import FIXTURES

MANGLED = re.compile(r"_Z[NZL]?\d")


def test_junit_and_summary_use_short_names(tmp_path):
    base = FIXTURES / "warp_multi"
    job = tmp_path / "torch-step"
    job.mkdir()
    trace = base / "iket_pid_0x7c4.trace.json"
    doc = json.loads(trace.read_text())
    for launch in doc["launches"]:  # every launch of PyTorch's reduction twice as long
        if "reduce_kernel" in launch["kernelName"]:
            for warp in launch["warpLifetimes"]:
                warp["endTs"] += warp["endTs"] - warp["startTs"]
    (job / trace.name).write_text(json.dumps(doc))
    shutil.copytree(base / "gen-config", job / "gen-config")
    changes = diff.compare(open_capture(base), open_capture(job), fail_over="10%")
    regressions = [asdict(c) for c in changes if c.regression]
    assert [r["name"] for r in regressions] == ["at::native::reduce_kernel<…>"]
    record = {
        "name": "torch-step",
        "status": "regressed",
        "duration_s": 9.2,
        "gpu": "0",
        "error": None,
        "manifest": "torch-step/manifest.json",
        "regressions": regressions,
        "log_tail": [],
    }
    xml = ci.junit([record])
    assert 'name="at::native::reduce_kernel&lt;…&gt;/launch span"' in xml and not MANGLED.search(xml)
    page = ci.summary_markdown([record], tmp_path)
    assert "- **regression** at::native::reduce_kernel&lt;…&gt; / launch span: 2.0" in page
    assert "| launch |" in page, "the job's warp-traced kernels in the top table"
    assert not MANGLED.search(page)
