"""A stitch's jobs: cut by bytes, written where planned, and what a job that cannot be written
says, in this process and through a real long-lived worker."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from iket_cli.decode import decoder
from iket_cli.decode.split import chunks
from iket_cli.decode.split.json import merge as join
from iket_cli.decode.split.json import stitch, stitch_jobs
from iket_cli.decode.workers import Workers

from conftest import kept


def _stitch(tmp_path: Path, count: int = 3) -> stitch.Stitch:
    """cute_pipeline's launch (8 CTAs) in ``count`` chunks, spooled with their indices."""
    raw = kept(tmp_path, "cute_pipeline") / "iket" / "pid_0xfc5" / "iket.data.json"
    data = json.loads(raw.read_text())
    launch = next(x for x in data["launches"] if x["canDecode"])
    blocks = chunks.ctas(launch)
    spools = []
    for number, (first, last) in enumerate(chunks.spans(blocks, count)):
        manifest = raw.with_name(f".c{number}.json")
        manifest.write_text(json.dumps({**data, "launches": [chunks.chunk(launch, first, last)]}))
        spools.append(raw.with_name(f".c{number}.out"))
        join.spool(decoder.decoder_class()(str(manifest)), spools[-1], find_indices=True)
    return stitch.Stitch(spools, chunks.firsts(blocks, count), blocks)


def test_jobs_share_the_bytes_and_name_only_their_chunks(tmp_path):
    with _stitch(tmp_path) as stitch:
        plan = stitch.plan(tmp_path / "out", 100, None, None, parts=3)
        one = stitch.plan(tmp_path / "out", 100, None, None, parts=1)
    assert len(plan.jobs) == 3 and len(one.jobs) == 1
    sizes = [sum(group[3] for group in job["groups"]) for job in plan.jobs]
    assert sum(sizes) == sum(group[3] for group in one.jobs[0]["groups"])
    assert max(sizes) < 0.5 * sum(sizes), sizes
    groups = [group for job in plan.jobs for group in job["groups"]]
    offsets = [group[2] for group in groups]
    assert offsets == sorted(offsets) and offsets[0] > 100, "in the output's order, after the launch's fields"
    for job in plan.jobs:
        assert sorted({group[0] for group in job["groups"]}) == list(range(len(job["sources"])))
    assert plan.end == one.end and plan.fixed == one.fixed


def test_a_job_that_cannot_be_written_says_so(tmp_path):
    """A full disk (``/dev/full``) is an OSError with its errno, here and in a worker; a run
    whose bytes are not the length planned is refused before it is written."""
    with _stitch(tmp_path) as stitch:
        (job,) = stitch.plan(Path("/dev/full"), 0, None, None).jobs
    with pytest.raises(OSError) as full:
        stitch_jobs.write(job)
    assert full.value.errno == errno.ENOSPC
    server = Workers().server()
    try:
        answer = server.pieces(job)
    finally:
        server.close()
    assert answer == {"error": "No space left on device", "errno": errno.ENOSPC}
    out = tmp_path / "out"
    out.write_bytes(b"")
    wrong = {
        **job,
        "out": str(out),
        "groups": [[*job["groups"][0][:3], job["groups"][0][3] + 1, *job["groups"][0][4:]]],
    }
    with pytest.raises(ValueError, match="not its planned length"):
        stitch_jobs.write(wrong)
    assert out.read_bytes() == b""
