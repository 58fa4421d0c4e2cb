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


def test_the_time_left_is_estimated_from_the_decodes_done():
    assert progress.time_left(10.0, 1, 4) == 30.0, "a quarter done in 10 s: 30 s to go"
    assert progress.time_left(10.0, 0, 4) is None and progress.time_left(10.0, 4, 4) is None


def test_decode_progress_counts_the_launches_of_a_split_export(tmp_path, capsys):
    from pathlib import Path

    from iket_cli.decode.tasks import Outcome, Task

    whole = Task("0x2b5", Path(tmp_path / "iket.data.json"), tmp_path, "json", ("json",))
    parts = whole.parts(2)
    shown = progress.DecodeProgress(quiet=False)
    with shown:
        shown.planned(parts)
        shown.started(whole)
        for part in parts:
            shown.started(part)
            shown.finished(Outcome(part, 1.0))
        shown.finished(Outcome(whole, 2.0))
    lines = capsys.readouterr().err.splitlines()
    assert "iket: decoding pid 0x2b5 json launch 2 of 2..." in lines
    first = "iket: pid 0x2b5 json launch 1 of 2 done in 1.0 s (1 of 2 decodes done, about "
    assert lines[2].startswith(first)
    assert lines[4] == "iket: pid 0x2b5 json launch 2 of 2 done in 1.0 s (2 of 2 decodes done)"
    assert lines[5] == "iket: pid 0x2b5 json done in 2.0 s", "the merge is not a decode of its own"


def test_the_parts_of_a_split_perfetto_export_are_named_perfetto(tmp_path, capsys):
    from pathlib import Path

    from iket_cli.decode.tasks import Outcome, Task

    whole = Task("0x2b5", Path(tmp_path / "iket.data.json"), tmp_path, "perfetto", ("perfetto",))
    part = whole.parts(2)[1]
    shown = progress.DecodeProgress(quiet=False)
    with shown:
        shown.planned([part])
        shown.started(part)
        shown.finished(Outcome(part, 1.0))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "iket: decoding pid 0x2b5 perfetto launch 2 of 2...", lines
    assert lines[1].startswith("iket: pid 0x2b5 perfetto launch 2 of 2 done in 1.0 s"), lines
