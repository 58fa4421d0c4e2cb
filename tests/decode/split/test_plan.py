"""How a split export's work is handed out: stitch jobs before chunks, and a job's answer
turned into the error the pool reports."""

from __future__ import annotations

import errno
import threading

import pytest

from iket_cli.decode.split.plan import Batch, Pieces, Writers
from iket_cli.decode.tasks import Task


def _answering(batch: Batch, answer: dict | None) -> threading.Thread:
    """A worker's loop in little: every stitch job it takes gets ``answer``."""

    def serve():
        while (unit := batch.next()) is not None:
            if isinstance(unit, Pieces):
                unit.future.set_result(answer)

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("answer", "raised"),
    [
        ({"error": "No space left on device", "errno": errno.ENOSPC}, OSError),
        ({"error": "a stitched run of .c0.out is not its planned length", "errno": None}, ValueError),
        (None, ValueError),
        ({"error": None, "errno": None}, None),
    ],
)
def test_a_jobs_answer_is_the_error_the_pool_reports(tmp_path, answer, raised):
    batch = Batch([])
    thread = _answering(batch, answer)
    try:
        if raised is None:
            Writers(batch, 2)([{"out": "x"}, {"out": "y"}])
        else:
            with pytest.raises(raised) as error:
                Writers(batch, 2)([{"out": str(tmp_path / "out")}])
            if raised is OSError:
                assert (error.value.errno, error.value.filename) == (errno.ENOSPC, None), (
                    "the pool names the artifact"
                )
    finally:
        batch.abandon()
        thread.join(5)
    assert not thread.is_alive(), "the workers stop once the batch is over"


def test_stitch_jobs_go_before_the_chunks_and_an_abandoned_batch_answers_all(tmp_path):
    units = [Task("0x1", tmp_path / f"u{n}", tmp_path, "json", ("json",)) for n in range(3)]
    batch = Batch(units)
    assert batch.next() is units[0]
    futures = batch.first([{"out": "a"}, {"out": "b"}])
    first, second = batch.next(), batch.next()
    assert isinstance(first, Pieces) and isinstance(second, Pieces)
    assert (first.job, second.job) == ({"out": "a"}, {"out": "b"}), "in order, before the next chunk"
    assert batch.next() is units[1]
    batch.abandon()
    assert batch.next() is None
    assert batch.futures[units[2]].result().cancelled
    late = batch.first([{"out": "c"}])
    assert late[0].result(timeout=1) is None, "a job after the end is answered, never waited on"
    assert not futures[0].done(), "a job taken is the worker's to answer"
