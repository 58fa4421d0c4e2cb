"""The lint and report of a decoded capture: worked out beside the decode, or after it, the same."""

from __future__ import annotations

import json
import threading

from iket_cli.model import manifest
from iket_cli.render import report

from conftest import kept

_PARTS = report.drawn_parts


def _decoded(tmp_path, monkeypatch, name: str, *, ahead: bool) -> tuple:
    """``cute_pipeline`` (a DAG: arrows) decoded as a big capture is (its JSON export by
    launches and CTA chunks, its trace assembled by the decode), with or without the work
    begun beside the decode; its report's data less the run's times, its lint and arrows,
    and the threads that built the report's costly parts."""
    from iket_cli.decode import pool
    from iket_cli.decode.split import chunks
    from iket_cli.pipeline import finish
    from iket_cli.pipeline.postprocess import postprocess_capture

    monkeypatch.setattr(pool, "INLINE_BYTES", -1)
    monkeypatch.setattr(chunks, "MIN_WARP_BYTES", 0)
    monkeypatch.setattr(chunks, "CHUNK_RAW_BYTES", 1 << 12)
    if not ahead:
        monkeypatch.setattr(finish.Ahead, "assembled", lambda self, name, trace: None)
    built_in: list[str] = []

    def parts(*args, **kwargs):
        built_in.append(threading.current_thread().name)
        return _PARTS(*args, **kwargs)

    monkeypatch.setattr(report, "drawn_parts", parts)
    folder = kept(tmp_path / name, "cute_pipeline")
    record, outcomes, _ = postprocess_capture(folder, ["perfetto", "json", "html"], jobs=2)
    assert all(o.error is None for o in outcomes), outcomes
    (process,) = record["processes"]
    page = report.embedded(folder / process["artifacts"]["html"]["path"])
    page.pop("meta")
    flows = (folder / "iket_pid_0xfc5.flows.pftrace").read_bytes()
    return page, manifest.read(folder)["lint"], process["flows"], flows, built_in


def test_the_report_begun_beside_the_decode_is_the_report_made_after_it(tmp_path, monkeypatch):
    """The decode hands its assembled trace on as soon as the JSON export is merged; the
    report's costly parts are built then, in a thread of their own, while the Perfetto
    export still runs: the page, the lint findings and the arrows are those made after
    the decode, and they were not built twice."""
    early = _decoded(tmp_path, monkeypatch, "early", ahead=True)
    late = _decoded(tmp_path, monkeypatch, "late", ahead=False)
    assert json.dumps(early[:3], sort_keys=True) == json.dumps(late[:3], sort_keys=True)
    assert early[3] == late[3], "the same .flows.pftrace"
    assert early[2] > 0, "the DAG's arrows drawn"
    assert len(early[4]) == 1 and early[4][0] != threading.current_thread().name, early[4]
    assert late[4] == [threading.current_thread().name]


def test_work_begun_on_a_trace_that_fails_is_done_again_by_the_finish(tmp_path, monkeypatch):
    """What the thread beside the decode could not work out, the finish works out itself."""
    from iket_cli.pipeline import finish

    def broken(self, name, trace, future):
        future.set_exception(RuntimeError("a bug in the early work"))

    monkeypatch.setattr(finish.Ahead, "_analyse", broken)
    failed = _decoded(tmp_path, monkeypatch, "failed", ahead=True)
    assert failed[2] > 0 and failed[4] == [threading.current_thread().name]
