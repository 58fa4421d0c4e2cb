"""What a file's writer hands its next reader: taken once, and never for a changed file."""

import os
from pathlib import Path

from iket_cli.model import memo, trace


def held(path: Path) -> trace.Trace:
    return trace.Trace(path, [], ["a"], [])


def test_a_held_trace_is_taken_once_and_only_for_the_file_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(memo, "_TRACES", {})
    path = tmp_path / "t.trace.json"
    path.write_text("{}")
    memo.hold(path, held(path))
    assert memo.take(path).strings == ["a"]
    assert memo.take(path) is None, "taken once"
    memo.hold(path, held(path))
    path.write_text('{"other": 1}')  # rewritten: another file
    assert memo.take(path) is None


def test_at_most_two_traces_are_held(tmp_path, monkeypatch):
    monkeypatch.setattr(memo, "_TRACES", {})
    paths = [tmp_path / f"{n}.json" for n in range(3)]
    for path in paths:
        path.write_text("{}")
        memo.hold(path, held(path))
    assert memo.take(paths[0]) is None, "the oldest went"
    assert memo.take(paths[1]) is not None and memo.take(paths[2]) is not None


def test_counts_are_remembered_until_the_file_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(memo, "_COUNTS", {})
    path = tmp_path / "t.json"
    path.write_bytes(b"xx")
    calls = []

    def count(p, keys):
        calls.append(p)
        return [p.read_bytes().count(keys[0])]

    assert memo.counts(path, (b"x",), count) == [2]
    assert memo.counts(path, (b"x",), count) == [2] and len(calls) == 1, "counted once"
    path.write_bytes(b"xxx")
    os.utime(path, ns=(1, 1))
    assert memo.counts(path, (b"x",), count) == [3] and len(calls) == 2
    memo.tell_counts(path, (b"x",), [7])
    assert memo.counts(path, (b"x",), count) == [7] and len(calls) == 2, "told by the writer"
