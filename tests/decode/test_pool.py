"""Decoding the real raw captures recorded on the H200 with the real decoder: the tasks,
the worker pool, and bytes identical to run-iket's."""

from __future__ import annotations

import gzip
import json
import os
import subprocess

import pytest

from iket_cli.decode import pool, tasks
from iket_cli.errors import UsageError
from iket_cli.model import artifacts
from iket_cli.model.vocab import FORMATS
from iket_cli.system import toolchain

from conftest import FIXTURES, kept

CAPTURES = {"affine": ["0x204"], "multi": ["0x23f"], "spawn": ["0x299", "0x2b5"]}


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_artifacts_identical_to_run_iket_on_the_h200(tmp_path, name):
    folder = kept(tmp_path, name)
    outcomes = pool.run(tasks.plan(folder, list(FORMATS)))
    assert [o.error for o in outcomes] == [None] * len(outcomes)
    for pid in CAPTURES[name]:
        stem = f"iket_pid_{pid}"
        for suffix in (".trace.json", ".pftrace"):  # .html is iket's own offline report
            assert (folder / f"{stem}{suffix}").read_bytes() == (
                FIXTURES / name / f"{stem}{suffix}"
            ).read_bytes()
        ours = (folder / f"{stem}.pftrace.gz").read_bytes()
        assert gzip.decompress(ours) == (FIXTURES / name / f"{stem}.pftrace").read_bytes()
        assert ours[4:8] == b"\0\0\0\0", "zero mtime: reproducible"


def test_identical_to_run_iket_postprocess_here(tmp_path, real_run_iket):
    """The same raw capture through `run-iket postprocess` on this machine."""
    ours, theirs = kept(tmp_path, "multi"), kept(tmp_path / "r", "multi")
    pool.run(tasks.plan(ours, ["json", "perfetto"]))
    env = toolchain.find().child_env(dict(os.environ))
    subprocess.run(
        [str(real_run_iket), "postprocess", str(theirs), "--format", "all"],
        check=True,
        env=env,
        capture_output=True,
    )
    for suffix in (".trace.json", ".pftrace"):
        assert (ours / f"iket_pid_0x23f{suffix}").read_bytes() == (
            theirs / f"iket_pid_0x23f{suffix}"
        ).read_bytes()


def test_exact_numbers(tmp_path):
    folder = kept(tmp_path, "affine")
    pool.run(tasks.plan(folder, ["json"]))
    trace = json.loads((folder / "iket_pid_0x204.trace.json").read_text())
    (launch,) = trace["launches"]
    (rng,), (mark,) = launch["ranges"], launch["markers"]
    assert trace["stringTable"][rng["rangeNameIdx"]] == "affine"
    assert rng["endTs"] - rng["startTs"] == 224
    assert trace["stringTable"][mark["markerNameIdx"]] == "loaded"
    assert mark["timestamp"] - rng["startTs"] == 64


@pytest.mark.parametrize("inline", [True, False], ids=["in-process", "worker-process"])
def test_corrupt_and_missing_files_are_named_others_still_decoded(tmp_path, monkeypatch, inline):
    if not inline:
        monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    folder = kept(tmp_path, "spawn")
    data = folder / "iket" / "pid_0x299" / "iket.data.bin"
    data.write_bytes(data.read_bytes()[:16])
    outcomes = pool.run(tasks.plan(folder, ["json", "perfetto"]))
    errors = {o.task.pid_hex: o.error for o in outcomes}
    assert "iket.data.bin is truncated" in errors["0x299"] and str(data) in errors["0x299"]
    assert (folder / "iket_pid_0x2b5.trace.json").read_bytes() == (
        FIXTURES / "spawn" / "iket_pid_0x2b5.trace.json"
    ).read_bytes()
    (folder / "iket" / "pid_0x2b5" / "iket.data.json").write_text("{not json")
    (outcome, *_) = [o for o in pool.run(tasks.plan(folder, ["json"])) if o.task.pid_hex == "0x2b5"]
    assert "is not a raw capture manifest" in outcome.error


def test_plan_and_jobs(tmp_path, monkeypatch):
    folder = kept(tmp_path, "spawn")
    planned = tasks.plan(folder, ["html"])
    assert sorted((t.pid_hex, t.export) for t in planned) == [
        ("0x299", "json"),
        ("0x299", "perfetto"),
        ("0x2b5", "json"),
        ("0x2b5", "perfetto"),
    ], "the report is made from the JSON trace"
    perfetto = next(t for t in planned if t.export == "perfetto")
    assert perfetto.outputs() == [f"iket_pid_{perfetto.pid_hex}.pftrace.gz"]
    with pytest.raises(UsageError, match="unknown format"):
        tasks.plan(folder, ["pdf"])
    assert pool.default_jobs(planned[:2], 8) == 2, "no more workers than tasks"
    monkeypatch.setattr(pool.prestart, "mem_available", lambda: 1)
    assert pool.default_jobs(planned, 8) == 1, "memory bounds the workers"


def test_an_interrupt_in_the_callers_own_work_stops_the_workers(tmp_path, monkeypatch):
    """pool.start returns while the workers decode; a Ctrl-C in what the caller does then
    (iket postprocess imports the report's modules there) stops them as one in wait() would."""
    import time

    from iket_cli.errors import CaptureInterrupted

    monkeypatch.setattr(pool, "INLINE_BYTES", -1)  # a worker process even for a small capture
    folder = kept(tmp_path, "multi")
    planned = tasks.plan(folder, ["json", "perfetto"])
    with pytest.raises(CaptureInterrupted, match="while decoding"), pool.start(planned, jobs=2) as decoding:
        deadline = time.monotonic() + 10
        while not decoding.workers._running and time.monotonic() < deadline:
            time.sleep(0.005)
        running = list(decoding.workers._running)
        assert running, "a worker was started"
        raise KeyboardInterrupt
    assert all(proc.poll() is not None for proc in running), "the workers were stopped"
    assert not [p for t in planned for p in pool.partials(t) if p.exists()], "no half-written file"
    assert not list(folder.glob("iket_pid_*")), "nothing published"


class Recorder(pool.Progress):
    """What the pool reports, and the most units it had running at once."""

    def __init__(self) -> None:
        self.labels, self.running, self.most = [], 0, 0

    def started(self, task):
        self.labels.append((task.pid_hex, task.export, task.part))
        if task.part:
            self.running += 1
            self.most = max(self.most, self.running)

    def finished(self, outcome):
        if outcome.task.part:
            self.running -= 1


@pytest.mark.parametrize(("name", "pid", "launches"), [("multi", "0x23f", 4), ("warp_multi", "0x7c4", 27)])
def test_the_launches_of_one_process_decode_side_by_side(tmp_path, monkeypatch, name, pid, launches):
    """Each launch in a worker of its own, at most --jobs at once, merged to run-iket's bytes."""
    monkeypatch.setattr(pool, "INLINE_BYTES", -1)  # workers, as for a big capture
    folder = kept(tmp_path, name)
    progress = Recorder()
    (outcome,) = pool.run(tasks.plan(folder, ["json"]), jobs=3, progress=progress)
    assert outcome.error is None and outcome.written == [f"iket_pid_{pid}.trace.json"]
    parts = sorted(part for _, _, part in progress.labels if part)
    assert parts == [(k, launches) for k in range(launches)], "every launch was a task of its own"
    assert 1 < progress.most <= 3, "side by side, within --jobs"
    name_json = f"iket_pid_{pid}.trace.json"
    assert (folder / name_json).read_bytes() == (FIXTURES / name / name_json).read_bytes()
    assert sorted(p.name for p in (folder / "iket" / f"pid_{pid}").iterdir() if p.name.startswith(".")) == []
    counted = artifacts.count_keys(folder / name_json, artifacts.RECORD_KEYS)
    assert list(outcome.split.counts) == counted, "the merge returns the counts it made as it went"
    assert tasks.known_counts([outcome]) == {name_json: outcome.split.counts}


@pytest.mark.parametrize(
    ("name", "pid", "by_ctas"),
    [
        ("multi", "0x23f", False),
        ("warp_multi", "0x7c4", False),
        ("multi", "0x23f", True),
        ("cute_pipeline", "0xfc5", True),
    ],
)
def test_the_report_gets_the_trace_assembled_from_the_parts(tmp_path, monkeypatch, name, pid, by_ctas):
    """With html asked for, each part's worker scans its launch (or its chunk, the chunks'
    columns joined as the stitch joins their records); the merged trace handed to the report
    equals the merged file read back, column for column, and is taken once."""
    from dataclasses import fields

    from iket_cli.model import trace as trace_mod

    if by_ctas:
        _by_ctas(monkeypatch)
    monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    folder = kept(tmp_path, name)
    outcomes = pool.run(tasks.plan(folder, ["json", "html"]), jobs=3)
    assert all(o.error is None for o in outcomes)
    path = folder / f"iket_pid_{pid}.trace.json"
    taken = tasks.take_traces(outcomes)
    assert list(taken) == [path.name] and tasks.take_traces(outcomes) == {}, "taken once"
    assembled, read = taken[path.name], trace_mod.load(path)
    assert (assembled.strings, assembled.locations) == (read.strings, read.locations)
    assert len(assembled.launches) == len(read.launches) >= 1
    for ours, theirs in zip(assembled.launches, read.launches, strict=True):
        assert (ours.kernel, ours.grid, ours.block, ours.grid_id, ours.cluster) == (
            theirs.kernel, theirs.grid, theirs.block, theirs.grid_id, theirs.cluster
        )  # fmt: skip
        for kind in ("ranges", "markers", "warps"):
            for column in fields(trace_mod.Columns):
                mine, file = (
                    getattr(getattr(ours, kind), column.name),
                    getattr(getattr(theirs, kind), column.name),
                )
                assert (mine.typecode, list(mine)) == (file.typecode, list(file)), (kind, column.name)
    assert not list((folder / "iket" / f"pid_{pid}").glob(".part*")), (
        "the columns were removed with the spools"
    )


def test_one_launch_that_cannot_decode_fails_its_process_alone_and_leaves_nothing(tmp_path, monkeypatch):
    """A part whose worker dies (its manifest points past the end of the data: the decoder
    aborts its process) fails the JSON export, named by its launch; the Perfetto export of
    the same capture stands; no part, spool or half-written export is left."""
    from iket_cli.decode.split import launches

    monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    written = launches.Plan.write

    def one_broken(plan, export="json"):
        parts = written(plan, export)
        if export != "json":
            return parts
        data = json.loads(parts[1].path.read_text())
        data["launches"][0]["dataRef"]["offset"] = 1 << 40  # far past the end of iket.data.bin
        parts[1].path.write_text(json.dumps(data))
        return parts

    monkeypatch.setattr(launches.Plan, "write", one_broken)
    folder = kept(tmp_path, "multi")
    outcomes = {o.task.export: o for o in pool.run(tasks.plan(folder, ["json", "perfetto"]), jobs=3)}
    failed = outcomes["json"]
    assert failed.error and "launch 2 of 4" in failed.error, failed.error
    assert outcomes["perfetto"].error is None and (folder / "iket_pid_0x23f.pftrace").is_file()
    assert not (folder / "iket_pid_0x23f.trace.json").exists()
    leftovers = [p.name for p in folder.rglob(".*") if p.is_file()]
    assert leftovers == [], leftovers


def _by_ctas(monkeypatch) -> list:
    """Every launch of more than one CTA decoded a CTA a chunk; the worker processes started."""
    from iket_cli.decode import workers
    from iket_cli.decode.split import chunks

    monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    monkeypatch.setattr(chunks, "CHUNK_RAW_BYTES", 1)
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)  # the fixtures' small warps split too
    started, start = [], workers.spawn.start

    def counted(argv, **options):
        started.append(list(argv))
        return start(argv, **options)

    monkeypatch.setattr(workers.spawn, "start", counted)
    return started


@pytest.mark.parametrize(
    ("name", "pid"), [("multi", "0x23f"), ("cute_pipeline", "0xfc5"), ("warp_multi", "0x7c4")]
)
def test_launches_decoded_by_ctas_in_workers_that_stay(tmp_path, monkeypatch, name, pid):
    """Each launch's CTA chunks go to at most --jobs long-lived workers; the chunks stitched
    and the launches merged give run-iket's bytes; nothing is left beside the raw data."""
    from iket_cli.decode.split import launches as join

    started = _by_ctas(monkeypatch)
    folder = kept(tmp_path, name)
    progress = Recorder()
    planned = tasks.plan(folder, ["json"])
    chunks = join.planned_parts(planned[0].raw, 1)
    (outcome,) = pool.run(planned, jobs=3, progress=progress)
    assert outcome.error is None
    name_json = f"iket_pid_{pid}.trace.json"
    assert (folder / name_json).read_bytes() == (FIXTURES / name / name_json).read_bytes()
    units = [label for label in progress.labels if label[2]]
    assert len(units) == sum(chunks) > len(chunks), "every chunk a unit of its own"
    servers = [argv for argv in started if "--serve" in argv]
    assert servers == started and 1 < len(servers) <= 3, "within --jobs, each worker taking many"
    assert sorted(p.name for p in (folder / "iket" / f"pid_{pid}").iterdir() if p.name.startswith(".")) == []
    counted = artifacts.count_keys(folder / name_json, artifacts.RECORD_KEYS)
    assert list(outcome.split.counts) == counted


def test_a_launch_that_does_not_stitch_is_decoded_whole(tmp_path, monkeypatch):
    """Chunks the stitch refuses (ValueError: not the layout it relies on) cost time, not the
    export: the launch is decoded whole, the bytes are run-iket's."""
    from iket_cli.decode.split.json import stitch

    _by_ctas(monkeypatch)

    def refuse(*args, **kwargs):
        raise ValueError("not this layout")

    monkeypatch.setattr(stitch, "Stitch", refuse)
    folder = kept(tmp_path, "cute_pipeline")
    (outcome,) = pool.run(tasks.plan(folder, ["json"]), jobs=2)
    assert outcome.error is None
    name_json = "iket_pid_0xfc5.trace.json"
    assert (folder / name_json).read_bytes() == (FIXTURES / "cute_pipeline" / name_json).read_bytes()
    assert not list((folder / "iket" / "pid_0xfc5").glob(".part*"))


def test_a_chunk_whose_worker_dies_fails_the_json_alone_and_leaves_nothing(tmp_path, monkeypatch):
    """A chunk the decoder aborts on (its manifest points past the data) takes its worker:
    the JSON export fails named by launch and chunk, the Perfetto export stands, no chunk,
    spool or worker is left."""
    _by_ctas(monkeypatch)
    _a_chunk_past_the_data(monkeypatch, "json")
    folder = kept(tmp_path, "cute_pipeline")
    outcomes = {o.task.export: o for o in pool.run(tasks.plan(folder, ["json", "perfetto"]), jobs=2)}
    failed = outcomes["json"]
    assert failed.error and "launch 1 of 1, CTA chunk 3/8" in failed.error and "crashed" in failed.error, (
        failed.error
    )
    assert outcomes["perfetto"].error is None
    assert not (folder / "iket_pid_0xfc5.trace.json").exists()
    assert [p.name for p in folder.rglob(".*") if p.is_file()] == []


def test_a_stitch_job_a_worker_refuses_fails_the_json_alone_and_leaves_nothing(tmp_path, monkeypatch):
    """The workers write a stitched launch's runs where the plan puts them; a run whose bytes
    are not the length planned (here: a plan made one byte too long a run) is refused in
    the worker before it is written, and the JSON export fails, named; nothing is left."""
    from iket_cli.decode.split.json import stitch

    started = _by_ctas(monkeypatch)
    lengths = stitch.Stitch._lengths
    monkeypatch.setattr(stitch.Stitch, "_lengths", lambda *args: lengths(*args) + 1)
    folder = kept(tmp_path, "cute_pipeline")
    outcomes = {o.task.export: o for o in pool.run(tasks.plan(folder, ["json", "perfetto"]), jobs=2)}
    failed = outcomes["json"]
    assert failed.error and "merging its launches: a stitched run of" in failed.error, failed.error
    assert outcomes["perfetto"].error is None and len([a for a in started if "--serve" in a]) == 2
    assert not (folder / "iket_pid_0xfc5.trace.json").exists()
    assert [p.name for p in folder.rglob(".*") if p.is_file()] == []


def _a_chunk_past_the_data(monkeypatch, export: str) -> None:
    """The third CTA chunk of ``export``'s first launch points past the end of the raw data:
    the decoder aborts its worker on it."""
    from iket_cli.decode.split import launches

    written = launches.Plan.write

    def one_broken(plan, which="json"):
        parts = written(plan, which)
        if which == export:
            chunk = parts[0].chunks[2]
            data = json.loads(chunk.read_text())
            data["launches"][0]["dataRef"]["offset"] = 1 << 40
            chunk.write_text(json.dumps(data))
        return parts

    monkeypatch.setattr(launches.Plan, "write", one_broken)


def _perfetto_by_ctas(monkeypatch) -> list:
    """The Perfetto export of every launch of more than one CTA split a CTA a chunk."""
    from iket_cli.decode.split import chunks

    started = _by_ctas(monkeypatch)
    monkeypatch.setattr(chunks, "perfetto_chunk_bytes", lambda raw_bytes, cpus: 1)
    return started


@pytest.mark.parametrize("hold", [True, False], ids=["parts-kept", "parts-spooled"])
@pytest.mark.parametrize(("name", "pid"), [("multi", "0x23f"), ("cute_pipeline", "0xfc5")])
def test_the_perfetto_export_by_ctas_in_workers_is_run_iket_trace(tmp_path, monkeypatch, name, pid, hold):
    """Each CTA chunk of the Perfetto export is exported and moved by at most --jobs workers
    that stay; joined, it is the trace of run-iket's file (conftest.perfetto_view), its .gz
    the same bytes deflated; the outcome says it was joined; nothing is left beside the raw.
    ``hold``: each worker keeps its parts in memory for their moves, or (as where memory is
    short and the join does not wait for the part) spools each and any worker moves it."""
    from iket_cli.decode import schedule as plan

    from conftest import perfetto_view

    started = _perfetto_by_ctas(monkeypatch)
    monkeypatch.setattr(tasks.Task, "may_hold", lambda self, units, at_once: True)
    if not hold:
        monkeypatch.setattr(plan.Batch, "keeps", lambda self, unit: False)
    folder = kept(tmp_path, name)
    progress = Recorder()
    done = {
        o.task.export: o
        for o in pool.run(tasks.plan(folder, ["perfetto", "html"]), jobs=3, progress=progress)
    }
    outcome = done["perfetto"]
    assert outcome.error is None and done["json"].error is None, outcome.error
    ours = (folder / f"iket_pid_{pid}.pftrace").read_bytes()
    assert gzip.decompress((folder / f"iket_pid_{pid}.pftrace.gz").read_bytes()) == ours
    assert perfetto_view(ours) == perfetto_view((FIXTURES / name / f"iket_pid_{pid}.pftrace").read_bytes())
    units = [label for label in progress.labels if label[2] and label[1] == "perfetto"]
    assert outcome.split.joined == {"parts": len(units), "identity": "trace"} and len(units) > 2
    servers = [argv for argv in started if "--serve" in argv]
    assert servers == started and len(servers) <= 2 * 3, "each split export's own workers"
    assert progress.most <= 3, "within --jobs"
    assert [p.name for p in folder.rglob(".*") if p.is_file()] == []


def test_the_perfetto_export_by_launches_in_workers_is_run_iket_bytes(tmp_path, monkeypatch):
    """Split by launches only (small launches: no chunks), the join is run-iket's file."""
    monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    folder = kept(tmp_path, "multi")
    (outcome,) = pool.run(tasks.plan(folder, ["perfetto"]), jobs=2)
    assert outcome.error is None and outcome.split.joined == {"parts": 4, "identity": "bytes"}
    name = "iket_pid_0x23f.pftrace"
    assert (folder / name).read_bytes() == (FIXTURES / "multi" / name).read_bytes()


def test_a_perfetto_chunk_whose_worker_dies_fails_the_perfetto_alone_and_leaves_nothing(
    tmp_path, monkeypatch
):
    """A chunk of the Perfetto export the decoder aborts on takes its worker: the Perfetto
    export fails named by launch and chunk, the JSON export stands (run-iket's bytes), no
    part, spool, moved section or half-written .pftrace is left."""
    _perfetto_by_ctas(monkeypatch)
    _a_chunk_past_the_data(monkeypatch, "perfetto")
    folder = kept(tmp_path, "cute_pipeline")
    outcomes = {o.task.export: o for o in pool.run(tasks.plan(folder, ["json", "perfetto", "html"]), jobs=2)}
    failed = outcomes["perfetto"]
    assert failed.error and "launch 1 of 1, CTA chunk 3/8" in failed.error and "crashed" in failed.error, (
        failed.error
    )
    assert outcomes["json"].error is None
    name = "iket_pid_0xfc5.trace.json"
    assert (folder / name).read_bytes() == (FIXTURES / "cute_pipeline" / name).read_bytes()
    assert not list(folder.glob("*.pftrace*"))
    assert [p.name for p in folder.rglob(".*") if p.is_file()] == []


def test_a_move_a_worker_refuses_fails_the_perfetto_alone_and_leaves_nothing(tmp_path, monkeypatch):
    """A move job that cannot be done (here: a table that misses the part's tracks) is
    refused by its worker; the Perfetto export fails, named; nothing is left."""
    from iket_cli.decode.split.perfetto import join as pftrace_join

    _perfetto_by_ctas(monkeypatch)
    planned = pftrace_join.Join.add

    def short_table(self, spool, first=0, described=None, *, held=False):
        job = planned(self, spool, first, described, held=held)
        if job:
            job["table"] = job["table"][:3]
        return job

    monkeypatch.setattr(pftrace_join.Join, "add", short_table)
    folder = kept(tmp_path, "cute_pipeline")
    outcomes = {o.task.export: o for o in pool.run(tasks.plan(folder, ["json", "perfetto"]), jobs=2)}
    failed = outcomes["perfetto"]
    assert failed.error and "joining its launches" in failed.error, failed.error
    assert outcomes["json"].error is None
    assert not list(folder.glob("*.pftrace*"))
    assert [p.name for p in folder.rglob(".*") if p.is_file()] == []


def test_a_split_perfetto_export_runs_no_more_parts_at_once_than_fit_its_whole_memory(tmp_path, monkeypatch):
    """Parts at once are bounded so that together they take about what the export made whole
    would (each its share plus a worker's own memory), two at least, whatever --jobs says."""
    from iket_cli.decode.tasks import MEMORY_FACTOR, WORKER_BYTES

    folder = kept(tmp_path, "multi")
    (task,) = tasks.plan(folder, ["perfetto"])
    whole = task.raw_bytes * MEMORY_FACTOR["perfetto"]
    for units in (2, 4, 12, 1000):
        most = task.most_at_once(units)
        assert most >= 2
        assert most == 2 or most * (whole // units + WORKER_BYTES) <= whole + WORKER_BYTES
    started = _perfetto_by_ctas(monkeypatch)
    monkeypatch.setattr(tasks.Task, "most_at_once", lambda self, units: 2)
    progress = Recorder()
    (outcome,) = pool.run(tasks.plan(folder, ["perfetto"]), jobs=8, progress=progress)
    assert outcome.error is None and outcome.split.joined["parts"] > 2
    assert len([argv for argv in started if "--serve" in argv]) == 2 and progress.most <= 2


def test_parts_are_kept_for_their_moves_only_where_the_whole_exports_memory_allows(tmp_path, monkeypatch):
    """keep256's Perfetto export (11.8 MB raw, 12 parts): two workers side by side may each
    keep their parts until moved, within what the whole export would take; six (the most
    its memory lets run at once, as on sixteen CPUs) may not (each part is then kept only
    while the join waits for it)."""
    from iket_cli.decode.tasks import HELD_FACTOR, WORKER_BYTES

    monkeypatch.setattr(tasks.Task, "raw_bytes", property(lambda self: 11_810_304))
    task = tasks.Task("0x238", tmp_path / "iket.data.json", tmp_path, "perfetto", ("perfetto",))
    most = task.most_at_once(12)
    assert most == 6
    assert task.may_hold(12, 2) and not task.may_hold(12, most)
    for at_once in range(1, most + 1):
        used = at_once * (task.memory // 12 + WORKER_BYTES) + task.raw_bytes * HELD_FACTOR
        assert task.may_hold(12, at_once) == (used <= task.memory + WORKER_BYTES)
