"""A JSON export by launches and CTA chunks: handed out before the Perfetto parts, its next
launch read while the one before is written, nothing left when a read fails."""

from __future__ import annotations

import errno

from iket_cli.decode import pool, tasks
from iket_cli.decode.split import chunks
from iket_cli.decode.split.json import stitch

from conftest import FIXTURES, kept


def _by_ctas(monkeypatch) -> None:
    monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    monkeypatch.setattr(chunks, "CHUNK_RAW_BYTES", 1)
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)


class Order(pool.Progress):
    """The exports of the units in the order the workers began them."""

    def __init__(self) -> None:
        self.exports: list[str] = []

    def started(self, task) -> None:
        if task.part:
            self.exports.append(task.export)


def test_the_json_units_go_to_the_workers_before_the_perfetto_parts(tmp_path, monkeypatch):
    """With every format, a process's JSON units are handed out first (its launches end in a
    stitch and a merge, and the report waits for them): the workers begin every JSON unit
    before any Perfetto part, though the Perfetto export is planned as soon."""
    _by_ctas(monkeypatch)
    monkeypatch.setattr(chunks, "perfetto_chunk_bytes", lambda raw_bytes, cpus: 1)
    folder = kept(tmp_path, "cute_pipeline")
    order = Order()
    outcomes = pool.run(tasks.plan(folder, ["perfetto", "json"]), jobs=2, progress=order)
    assert [o.error for o in outcomes] == [None, None]
    first_perfetto = order.exports.index("perfetto")
    assert set(order.exports[:first_perfetto]) == {"json"}
    assert "json" not in order.exports[first_perfetto:], order.exports
    name = "iket_pid_0xfc5.trace.json"
    assert (folder / name).read_bytes() == (FIXTURES / "cute_pipeline" / name).read_bytes()


def test_a_launch_read_ahead_that_fails_fails_the_json_alone_and_leaves_nothing(tmp_path, monkeypatch):
    """The reader reads launch after launch beside the writes; a read that fails (here the
    third launch's chunks cannot be read: a full disk's EIO, say) fails the JSON export
    named, the launches read ahead are let go, and no part, spool or output is left."""
    _by_ctas(monkeypatch)
    reads, real = [], stitch.Stitch

    def third_fails(spools, firsts, ctas):
        reads.append(len(spools))
        if len(reads) == 3:
            raise OSError(errno.EIO, "Input/output error", str(spools[0]))
        return real(spools, firsts, ctas)

    monkeypatch.setattr(stitch, "Stitch", third_fails)
    folder = kept(tmp_path, "warp_multi")
    (outcome,) = pool.run(tasks.plan(folder, ["json"]), jobs=2)
    assert outcome.error and "Input/output error" in outcome.error, outcome.error
    assert len(reads) == 3
    assert not (folder / "iket_pid_0x7c4.trace.json").exists()
    assert [p.name for p in folder.rglob(".*") if p.is_file()] == []
