"""``--extract`` and ``--replay`` in a capture: the saved calls before the passes, their check after.

Before the passes, the record run saves FUNC's chosen calls (``--extract``), or the earlier
capture's saved calls are copied (``--replay DIR``), into the staging folder's
``extract/``, which the passes' replay process reads and the capture publishes. After the
passes, what the replay found when it compared its results with the recorded ones goes
into the manifest, and a difference is said (the capture stays valid: FUNC read state its
arguments do not carry).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..capture.events import Reporter
from ..capture.plan import Plan, tracker_key
from ..capture.saved_calls import extract, record_run, replay, replay_trust
from ..capture.staging import Staging
from ..capture.two_pass import trackers
from ..capture.two_pass.passes import Transcript
from ..errors import IketError, UsageError
from ..model.vocab import EXTRACT_DIR, TRACKER_FRESH, TRACKER_REUSED
from ..system.runner import Line
from . import reuse
from .attempt import Attempt


def prepare(at: Attempt) -> dict[str, Any]:
    """The saved calls in ``staging``, recorded or copied; the manifest's ``extract`` record."""
    plan, staging, transcript = at.plan, at.staging, at.transcript
    assert plan.extract is not None
    folder = staging.root / EXTRACT_DIR
    chosen = plan.extract
    if chosen.replay_of is not None:
        facts = replay.copy_saved(chosen, folder)
        transcript.reporter.info(
            f"replaying {_calls(facts)} of {chosen.function} saved in {chosen.replay_of}"
        )
        return facts
    transcript.reporter.phase("record")
    transcript.note(f"record run of {plan.target.describe()}: {chosen.function}, {chosen.describe_calls()}")

    def line(text: Line) -> None:
        transcript.write(text.text)
        if not text.stopping:
            transcript.reporter.output(text.text, tool=False)

    facts = _recorded(
        chosen,
        plan.target,
        python=plan.python,
        env=plan.env,
        cwd=plan.cwd,
        folder=folder,
        token=staging.token,
        procs=staging.root / record_run.RECORD_PROCS,
        on_line=line,
        deadline=at.deadline,
        limit_s=plan.options.timeout,
        cancel=at.cancel,
        on_tick=staging.recorder.update,
        transcript=transcript,
    )
    replay_trust.remember(folder, plan.env)
    transcript.reporter.info(
        f"recorded {_calls(facts)} of {chosen.function} ({facts['bytes'] / 1e6:.1f} MB) in "
        f"{facts['record']['seconds']:.1f} s; the passes replay only that"
    )
    return facts


def rechosen(plan: Plan, staging: Staging, into: Path, reporter: Reporter) -> Plan:
    """``--extract``'s plan once the calls are saved: the tracker pass chosen again, by the
    saved calls' signature (capture/saved_calls/extract.Extract.key), so that a cached one is reused."""
    assert plan.extract is not None
    if plan.extract.replay_of is not None or plan.tracker.mode not in (TRACKER_FRESH, TRACKER_REUSED):
        return plan  # --replay knew its signature from the start; --tracker DIR is the user's
    saved = extract.signature(extract.read_index(staging.root / EXTRACT_DIR))
    plan = replace(plan, extract=replace(plan.extract, saved=saved))
    found = trackers.key(tracker_key(plan))
    if plan.tracker.rerun is not None:  # a cached one did not fit: this attempt runs both passes
        return replace(plan, tracker=replace(plan.tracker, key=found))
    chosen = trackers.choose(
        plan.options.tracker, warp_trace=plan.options.warp_trace, found=found, env=plan.env
    )
    if chosen.mode == TRACKER_REUSED:
        reporter.info(
            f"reusing the tracker pass of an earlier capture of these calls ({reuse.age(chosen)}): "
            "the replay runs once (--tracker fresh runs both passes)"
        )
    return replace(plan, tracker=trackers.staged(chosen, into))


def _recorded(chosen: extract.Extract, record: Any, *, transcript: Transcript, **run: Any) -> dict[str, Any]:
    """The record run; whatever way it ends, no partial saved call stays in the evidence."""
    folder = run["folder"]
    try:
        return record_run.run_record(chosen, record, **run)
    finally:
        dropped = record_run.drop_partial(folder)
        if dropped:
            transcript.reporter.info(
                f"dropped {', '.join(dropped)}: {'it was' if len(dropped) == 1 else 'they were'} "
                "being saved when the record run ended, and are incomplete"
            )


def damaged(plan: Plan, staging: Staging) -> IketError | None:
    """The replay's account of a damaged saved call (it exits with DAMAGED), as one error (exit 2)."""
    if plan.extract is None:
        return None
    said = extract.read_damage(staging.root / EXTRACT_DIR)
    if said is None:
        return None
    where = plan.extract.replay_of or "this capture"
    what = (
        f"the saved call {said['call']} in {where} is"
        if said.get("call")
        else f"the saved calls in {where} are"
    )
    return UsageError(
        f"{what} damaged: {said['message']}",
        hint="record the calls again: iket profile WORKLOAD --extract MODULE:FUNC -o DIR",
    )


def checked(facts: dict[str, Any], staging: Staging, transcript: Transcript) -> dict[str, Any]:
    """``facts`` with the replay's comparison; a difference is warned about."""
    check = extract.replay_check(staging.root / EXTRACT_DIR)
    differing = [c for c in (check or {}).get("calls", []) if not c.get("equal")]
    if differing:
        first = differing[0]
        transcript.reporter.warn(
            f"the replay's result of call {first['call']} of {facts['function']} differs from the recorded "
            f"one: {'; '.join(first.get('differences') or [])}",
            "FUNC reads state its arguments do not carry (a global, a cache, a random generator); "
            "the capture is valid but may not match the model's call",
        )
    return {**facts, "replay": check}


def _calls(facts: dict[str, Any]) -> str:
    calls = facts.get("calls") or []
    return f"call {calls[0]}" if len(calls) == 1 else f"calls {', '.join(map(str, calls))}"
