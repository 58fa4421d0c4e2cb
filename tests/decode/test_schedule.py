"""How a split export's work is handed out: stitch jobs before chunks, batches sharing one
set of workers, and a job's answer turned into the error the pool reports."""

from __future__ import annotations

import errno
import signal
import threading
import time

import pytest

from iket_cli.decode.schedule import Batch, Pieces, Queue, Slots, Writers
from iket_cli.decode.tasks import Task


def _answering(queue: Queue, answer: dict | None) -> threading.Thread:
    """A worker's loop in little: every stitch job it takes gets ``answer``."""

    def serve():
        while (taken := queue.next()) is not None:
            batch, unit = taken
            if isinstance(unit, Pieces):
                batch.answered(unit, answer)

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
    batch, queue = Batch([]), Queue()
    queue.add(batch)
    thread = _answering(queue, answer)
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
        batch.drained()
        queue.close()
        thread.join(5)
    assert not thread.is_alive(), "the workers stop once the decode is over"


def _next(queue: Queue):
    return queue.next()[1]


def test_stitch_jobs_go_before_the_chunks_and_an_abandoned_batch_answers_all(tmp_path):
    units = [Task("0x1", tmp_path / f"u{n}", tmp_path, "json", ("json",)) for n in range(3)]
    batch, queue = Batch(units), Queue()
    queue.add(batch)
    assert _next(queue) is units[0]
    futures = batch.first([{"out": "a"}, {"out": "b"}])
    first, second = _next(queue), _next(queue)
    assert isinstance(first, Pieces) and isinstance(second, Pieces)
    assert (first.job, second.job) == ({"out": "a"}, {"out": "b"}), "in order, before the next chunk"
    assert _next(queue) is units[1]
    batch.abandon()
    assert batch.futures[units[2]].result().cancelled
    late = batch.first([{"out": "c"}])
    assert late[0].result(timeout=1) is None, "a job after the end is answered, never waited on"
    assert not futures[0].done(), "a job taken is the worker's to answer"
    queue.close()
    assert queue.next() is None


def test_batches_share_the_workers_jobs_first_and_each_within_its_most(tmp_path):
    """Two exports' batches in one queue: any batch's jobs before any unit, then units batch
    by batch, never more of a batch's units at once than its ``most``; a batch is drained
    once what was handed out of it has ended."""
    units = [Task("0x1", tmp_path / f"u{n}", tmp_path, "perfetto", ("perfetto",)) for n in range(3)]
    others = [Task("0x1", tmp_path / f"j{n}", tmp_path, "json", ("json",)) for n in range(2)]
    capped, plain, queue = Batch(units, most=2), Batch(others), Queue()
    assert queue.add(capped) == 2 and queue.add(plain) == 4, "the units that may run at once"
    assert [_next(queue), _next(queue)] == units[:2]
    assert _next(queue) is others[0], "the capped batch waits: the next batch's unit"
    (job,) = plain.first([{"out": "x"}])
    taken = _next(queue)
    assert isinstance(taken, Pieces) and taken.future is job
    capped.done(units[0], None)
    assert _next(queue) is units[2], "a unit ended: the capped batch goes on"
    drained = threading.Thread(target=capped.drained)
    drained.start()
    drained.join(0.2)
    assert drained.is_alive(), "two of its units still run"
    for unit in units[1:]:
        capped.done(unit, None)
    drained.join(5)
    assert not drained.is_alive()
    plain.answered(taken, {"error": None})
    assert job.result(timeout=1) == {"error": None}
    queue.close()
    assert plain.futures[others[1]].result(timeout=1).cancelled, "closed: what was never handed out"


def test_a_batch_of_a_lower_rank_goes_first_whenever_it_was_added(tmp_path):
    later = [Task("0x1", tmp_path / f"p{n}", tmp_path, "perfetto", ("perfetto",)) for n in range(2)]
    sooner = [Task("0x1", tmp_path / f"j{n}", tmp_path, "json", ("json",)) for n in range(2)]
    queue = Queue()
    queue.add(Batch(later, rank=1))
    queue.add(Batch(sooner))
    assert [_next(queue) for _ in range(4)] == [*sooner, *later]
    queue.close()


def test_a_job_for_a_kept_part_goes_to_its_worker_alone_and_others_pass_it_over(tmp_path):
    """A Perfetto part's move goes to the worker that keeps the part: another worker takes
    the next unit past it (the job does not block the queue's head); the holder takes it
    before any unit."""
    units = [Task("0x1", tmp_path / f"u{n}", tmp_path, "perfetto", ("perfetto",)) for n in range(3)]
    batch, queue = Batch(units), Queue()
    queue.add(batch)
    mine, other = object(), object()
    assert queue.next(mine)[1] is units[0]
    (future,) = batch.first([{"kind": "move"}], mine)
    assert queue.next(other)[1] is units[1], "the other worker passes the job over"
    taken = queue.next(mine)[1]
    assert isinstance(taken, Pieces) and taken.future is future and taken.holder is mine
    (plain,) = batch.first([{"out": "x"}])
    assert queue.next(other)[1].future is plain, "a job for no worker in particular: anyone's"
    queue.close()


def test_the_worker_of_the_part_the_join_waits_for_waits_for_its_move(tmp_path):
    """While the join plans the unit a worker just ended, that worker takes no other unit:
    its move comes next (a move that waited for the worker's next export held up the end).
    A unit the join does not wait for: the worker goes on."""
    units = [Task("0x1", tmp_path / f"u{n}", tmp_path, "perfetto", ("perfetto",)) for n in range(3)]
    batch, queue = Batch(units), Queue()
    queue.add(batch)
    worker = object()
    first = queue.next(worker)[1]
    batch.planning(first)
    assert batch.keeps(units[1]), "a batch that may hold parts keeps every one"
    batch.hold = False
    assert batch.keeps(first) and not batch.keeps(units[1]), "kept: the one the join waits for"
    batch.done(first, None)
    got: list = []
    waiting = threading.Thread(target=lambda: got.append(queue.next(worker, (batch, first))))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive(), "no unit while the join plans the one it ended"
    (future,) = batch.first([{"kind": "move"}], worker)
    waiting.join(5)
    assert got[0][1].future is future, "its move, before any unit"
    batch.planning(units[1])
    assert queue.next(worker, (batch, first))[1] is units[1], "the join went on: so does the worker"
    queue.close()


def _taking(slots: Slots, name: str, taken: list[str], *, urgent: bool = False) -> threading.Thread:
    """A thread that takes a slot once, says so in ``taken``, and gives it back."""

    def take():
        with slots(urgent=urgent):
            taken.append(name)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    time.sleep(0.05)  # in line before whatever the test does next
    return thread


def test_a_slot_goes_to_who_asked_first_not_to_who_just_gave_one_back():
    """A worker that took the next part and waits for a slot is not passed by the worker
    that frees a slot and asks again at once (it was, 0.45 s in a row on the H100 host)."""
    slots, taken = Slots(1), []
    with slots():
        waiting = _taking(slots, "waiting", taken)
        taken.append("first")
    with slots():  # asked again at once by the thread that gave the slot back
        taken.append("again")
    waiting.join(5)
    assert taken == ["first", "waiting", "again"]


def test_a_slot_for_work_that_finishes_a_launch_goes_before_the_chunks_in_line():
    slots, taken = Slots(1), []
    with slots():
        chunk = _taking(slots, "chunk", taken)
        stitch = _taking(slots, "stitch", taken, urgent=True)
    for thread in (chunk, stitch):
        thread.join(5)
    assert taken == ["stitch", "chunk"]


def test_one_who_gave_up_waiting_leaves_the_line():
    """An interrupt in the wait (Ctrl-C on the CLI's thread) takes its place out of the line:
    the next asker is not left waiting behind a ticket nobody will use."""
    slots, taken = Slots(1), []
    holder_done = threading.Event()

    def hold():
        with slots():
            holder_done.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    time.sleep(0.05)

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt), slots():
            pytest.fail("the slot is held")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    later = _taking(slots, "later", taken)
    holder_done.set()
    for thread in (holder, later):
        thread.join(5)
    assert taken == ["later"]
    assert slots.free == 1
