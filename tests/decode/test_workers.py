"""Worker processes started ahead of a decode (during the capture pass): taken, or let go."""

from __future__ import annotations

import time

from iket_cli.decode import pool, prestart, tasks, workers
from iket_cli.decode.split import chunks

from conftest import FIXTURES, kept


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_started_ahead_decode_and_none_outlives_the_decode(tmp_path, monkeypatch):
    """A big capture's decode takes the workers started ahead (no other is started, each has
    NVIDIA's decoder imported by then), gives run-iket's bytes, and those it did not take
    end when let go: no process of either kind is left."""
    monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    monkeypatch.setattr(chunks, "CHUNK_RAW_BYTES", 1)
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)
    ahead = prestart.Prestarted(3)
    pids = [proc.pid for proc, _ in ahead._waiting]
    started, start = [], workers.spawn.start
    monkeypatch.setattr(prestart.spawn, "start", lambda argv, **kw: started.append(argv) or start(argv, **kw))
    folder = kept(tmp_path, "multi")
    time.sleep(0.5)  # let them import, as they do while a capture pass runs
    assert all(_alive(pid) for pid in pids), "waiting for work"
    (outcome,) = pool.run(tasks.plan(folder, ["json"]), jobs=2, prestarted=ahead)
    assert outcome.error is None
    name = "iket_pid_0x23f.trace.json"
    assert (folder / name).read_bytes() == (FIXTURES / "multi" / name).read_bytes()
    assert started == [], "no worker started: the two --jobs took two of those started ahead"
    assert len(ahead._waiting) == 1
    ahead.close()
    assert ahead.take() is None
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids), "every worker ended"


def test_a_cancelled_decode_kills_a_worker_it_takes(monkeypatch):
    """Once the decode is cancelled (an interrupt), a worker started ahead is not run: it is
    killed as it is taken, and the decode starts none."""
    ahead = prestart.Prestarted(1)
    ((proc, _),) = list(ahead._waiting)
    running = workers.Workers(ahead)
    running.cancel()
    server = running.server()
    assert server.proc is None
    assert proc.poll() is not None and proc.returncode < 0, "killed, not run"
    assert ahead.take() is None


def test_as_many_workers_start_ahead_as_the_decode_runs_at_once(tmp_path, monkeypatch):
    """keep256 with 16 jobs: its Perfetto export's parts are bounded by its memory to six
    at once, so six workers start ahead, not one a job; a small capture starts none."""
    import tarfile

    counts: list[int] = []
    monkeypatch.setattr(prestart, "start", lambda count=None: counts.append(count))
    with tarfile.open(FIXTURES / "keep256_raw.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    (task,) = tasks.plan(tmp_path / "keep256", ["perfetto"])
    prestart.for_tasks([task], jobs=16)
    from iket_cli.decode.split import launches

    units = pool._units(task, launches.plan(task.raw, pool._chunk_bytes(task, 16)))
    at_once = min(len(units), task.most_at_once(len(units)))
    assert counts == [at_once] and 1 < at_once < 16, (counts, len(units))
    prestart.for_tasks([task], jobs=2)
    assert counts[-1] == 2
    assert prestart.for_tasks(tasks.plan(kept(tmp_path, "multi"), ["json"]), jobs=16) is None
    assert len(counts) == 2, "a capture decoded in forks starts no worker ahead"


def test_a_move_of_a_kept_part_its_worker_no_longer_has_fails_by_name(tmp_path):
    """A worker keeps a Perfetto part in memory for its move; a move sent to a worker without
    it (the one that exported it ended, and a fresh one took its place) is refused, saying
    so, never moved from a file that is not there; a spool request for it, the same."""
    from iket_cli.decode import worker_main

    job = {"kind": "move", "spool": str(tmp_path / ".pfpart0.0.iket.data.out"), "held": True}
    answer = worker_main._pieces(job, {})
    assert answer["errno"] is None and "ended before its move" in answer["error"], answer
    assert worker_main._spooled(job["spool"], "perfetto", {})["error"] == "no such part kept"
    assert list(tmp_path.iterdir()) == []
