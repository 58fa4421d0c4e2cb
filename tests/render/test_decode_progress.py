"""What iket postprocess shows while it decodes (render/decode_progress.py)."""

from __future__ import annotations

from iket_cli.render import decode_progress as progress


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
