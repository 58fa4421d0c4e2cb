"""The console on a terminal: the workload's lines tagged with the pass that printed them,
and the one line that says why they come twice (the plain-lines path runs in the CLI tests)."""

from __future__ import annotations

import io

from iket_cli.render import progress


def test_a_terminal_tags_each_workload_line_with_its_pass(monkeypatch, capsys):
    monkeypatch.setattr(progress, "fancy_allowed", lambda stream: True)
    out = io.StringIO()
    with progress.ConsoleReporter(quiet=False, verbose=False, workload_out=out) as reporter:
        assert reporter.fancy
        reporter.phase("tracker")
        reporter.output("loss 0.5", tool=False)
        reporter.phase("capture")
        reporter.output("loss 0.5", tool=False)
        reporter.output("[run-iket] a tool line", tool=True)  # hidden without -v
        reporter.phase("postprocess")
    err = capsys.readouterr().err
    assert err.count(progress.TWICE.split(":")[0]) == 1
    assert "[tracker pass] loss 0.5" in err and "[capture pass] loss 0.5" in err
    assert "a tool line" not in err and out.getvalue() == ""


def test_counts_are_labelled():
    assert progress.counted({"launches": 1, "ranges": 1, "markers": 1}) == "1 launch · 1 range · 1 mark"
    assert (
        progress.counted({"launches": 27, "ranges": 0, "markers": None}) == "27 launches · 0 ranges · - marks"
    )


def test_the_phase_line_is_the_manifests():
    record = {
        "duration_s": 18.22,
        "phases": {"tracker": 9.674, "config": 0.002, "capture": 7.97, "postprocess": None},
    }
    assert (
        progress.phase_line(record)
        == "phases: tracker pass 9.67 s · capture pass 7.97 s (of 18.22 s, manifest.json)"
    )
