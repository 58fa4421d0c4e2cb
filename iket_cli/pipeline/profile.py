"""``iket profile``: one capture, start to end, as a few steps over a resolved plan.

    resolve (capture/plan) → lock + staging (capture/outdir) → the passes (capture/two_pass/passes)
    → decode (decode/pool) → --overhead run → drift (analysis/drift) → lint + report
    (pipeline/finish) → manifest (model/record) → publish, or the evidence in DIR.failed/

Every step reads the frozen :class:`~iket_cli.capture.plan.Plan` and returns what it
found; this module only sequences them and decides, from what they returned, whether the
capture is published or its evidence kept. An existing output directory is never changed
unless the new capture succeeded (and then only with ``clobber=True``).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..analysis import drift
from ..capture import outdir, runiket
from ..capture.events import Reporter
from ..capture.plan import Options, Plan, coerce_target, resolve
from ..capture.staging import Staging, remove_stale
from ..capture.targets import Target
from ..capture.two_pass import passes, stdin, trackers, warm
from ..capture.two_pass.passes import PassResult, Transcript
from ..capture.watchdog import Watchdog
from ..decode import decoder, prestart
from ..errors import (
    CaptureError,
    CaptureInterrupted,
    CaptureKilled,
    IketError,
    IncompleteCapture,
    Status,
    Terminated,
    signal_of,
)
from ..model.completeness import headline, losses_of
from ..model.vocab import (
    TRACKER_FRESH,
    TRACKER_REUSED,
    formats_for,
)
from ..system.signals import Publishing, as_exception
from . import attempt, completeness, in_process, overhead_run, publish, repeats, reuse, saved_calls
from .attempt import Attempt, Facts
from .capture import Capture
from .decoding import Decoded

#: Where a reused or given tracker output is copied inside the attempt's staging folder.
USED_TRACKER = "tracker-used"
#: The socket that serves the CLI's input to the capture pass, in the capture's socket folder.
STDIN_SOCKET = "stdin"


def profile(
    target_or_argv: str | os.PathLike | Sequence[str] | Target | None,
    output_dir: str | os.PathLike | None = None,
    *,
    postprocess: str = "all",
    clobber: bool = False,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    reporter: Reporter | None = None,
    cancel: threading.Event | None = None,
    **options: Any,
) -> Capture:
    """Capture an IKET timeline of a script, a function, a module or any command.

    ``target_or_argv`` is ``"script.py"``, ``"script.py:func"``, ``"pkg.module:func"``, a
    :class:`~iket_cli.capture.targets.Target`, or a command as a list (``["torchrun", ...]``);
    None with ``replay=DIR`` (the calls ``extract=MODULE:FUNC`` saved in capture DIR).
    Further keyword options are the fields of :class:`~iket_cli.capture.plan.Options`
    (``keep``, ``python``, ``run_iket``, ``max_ts_cnt_per_warp``, ``warp_trace``, ...);
    ``cancel``, set from another thread, stops the capture as Ctrl-C would. Raises a
    subclass of :class:`~iket_cli.errors.IketError` on any failure.
    """
    opts = Options(
        postprocess=postprocess,
        clobber=clobber,
        timeout=timeout,
        env=dict(env or {}),
        cwd=Path(cwd) if cwd is not None else None,
        **options,
    )
    target = None if target_or_argv is None else coerce_target(target_or_argv)
    plan = resolve(target, output_dir, opts)
    return run(plan, reporter or Reporter(), cancel)


def run(plan: Plan, reporter: Reporter, cancel: threading.Event | None = None) -> Capture:
    """Capture ``plan`` into its output directory, holding the directory's lock throughout.

    ``cancel``, set from another thread, stops the capture as a Ctrl-C would (``iket run``).
    """
    started = time.monotonic()
    publishing = Publishing(until_exit=plan.options.hold_until_exit)
    try:
        # SIGTERM outside a pass (a scheduler's stop, Slurm's scancel, while iket sets up)
        # unwinds as Ctrl-C does: the staging folder and the lock are removed. From the
        # publishing exchange on, the capture is complete: a signal then is only reported.
        with as_exception(), publishing, outdir.Lock(plan.output_dir):
            captured = _locked(plan, reporter, cancel, started, publishing)
    except (KeyboardInterrupt, Terminated) as signalled:
        if publishing.published is None:
            raise CaptureInterrupted.by(
                signal_of(signalled),
                " outside the capture passes; its staging folder was removed",
                phase="setup",
            ) from None
        captured = publishing.published  # the signal came as the handlers were put back
        publishing.arrived.append(signal_of(signalled))
    if publishing.arrived:
        reporter.warn(
            f"{publishing.arrived[0].name} arrived as the capture was being published; it is complete "
            f"in {captured.output_dir}",
            "nothing to do: a stop signal after the capture is published does not undo it",
        )
    return captured


def _locked(
    plan: Plan, reporter: Reporter, cancel: threading.Event | None, started: float, publishing: Publishing
) -> Capture:
    _remove_stale(plan.output_dir, reporter)
    try:
        return _staged(plan, reporter, cancel, started, publishing)
    except reuse.StaleTracker as stale:
        unfit = stale.tracker or plan.tracker
        missed = trackers.discard(unfit, plan.env)
        again = (
            "it will not be reused for this command again (its kernels seem to compile anew each run)"
            if missed >= trackers.MAX_MISSES
            else "this capture's tracker pass replaces it in the cache"
        )
        reporter.warn(
            f"the cached tracker pass does not fit this capture ({stale}); capturing again, "
            "with a tracker pass",
            f"nothing to do: {again}; --tracker fresh skips the cache",
        )
        fresh = trackers.Tracker(TRACKER_FRESH, key=unfit.key, rerun=str(stale))
        return _staged(replace(plan, tracker=fresh), reporter, cancel, started, publishing)


def _staged(
    plan: Plan, reporter: Reporter, cancel: threading.Event | None, started: float, publishing: Publishing
) -> Capture:
    with Staging.create(plan.output_dir) as staging:
        return _attempt(plan, staging, reporter, cancel, started, publishing)


def _remove_stale(output_dir: Path, reporter: Reporter) -> None:
    """What an earlier capture into DIR left when it died with its watchdog (both killed)."""
    for stale in remove_stale(output_dir):
        shutil.rmtree(warm.socket_dir(stale.token), ignore_errors=True)
        stopped = f"; stopped its {len(stale.killed)} process(es) still running" if stale.killed else ""
        reporter.warn(
            f"removed {stale.root.name} ({stale.bytes / 1e6:.1f} MB), left by a capture into "
            f"{output_dir.name} that was killed (pid {stale.owner_pid or '?'}){stopped}",
            "nothing to do: each capture cleans up what a killed one left",
        )


def _attempt(
    plan: Plan,
    staging: Staging,
    reporter: Reporter,
    cancel: threading.Event | None,
    started: float,
    publishing: Publishing,
) -> Capture:
    """The capture, guarded by a watchdog that cleans up should this process be killed."""
    facts = Facts.begin(
        [] if plan.in_process else runiket.profile_argv(plan, staging.capture_dir), t0=started
    )
    killed = CaptureKilled(
        "iket was killed (kill -9, the OOM killer or a preemption) during the capture; "
        "its watchdog stopped the capture's processes",
        hint="look for the OOM killer in dmesg, or the scheduler's log",
    )
    evidence = attempt.manifest(plan, staging, facts, killed.manifest_status, [], error=killed, gpus=[])
    sockets = warm.socket_dir(staging.token)
    try:
        with Watchdog(staging, remove=[sockets], evidence=evidence):
            return _capture(plan, staging, reporter, facts, cancel, publishing)
    finally:
        # What escaped the passes' process trees (a session of its own under a standby's
        # worker, say) still carries the capture's mark: nothing of it outlives the capture.
        staging.kill_processes()
        shutil.rmtree(sockets, ignore_errors=True)  # the standbys' folder (each removed its own socket)


def _capture(
    plan: Plan,
    staging: Staging,
    reporter: Reporter,
    facts: Facts,
    cancel: threading.Event | None,
    publishing: Publishing,
) -> Capture:
    """The steps up to publishing; any failure keeps its evidence in DIR.failed/."""
    formats = formats_for(plan.options.postprocess)
    prestarted = None
    if formats:  # load the decoder and numpy while the passes run, and start the decode's workers
        threading.Thread(target=_preload, daemon=True).start()
        prestarted = prestart.start()
    deadline = None if plan.options.timeout is None else facts.t0 + plan.options.timeout
    transcript: Transcript | None = None
    if plan.tracker.mode == TRACKER_REUSED:
        reporter.info(
            f"reusing the tracker pass of an earlier capture of this command ({reuse.age(plan.tracker)}): "
            "the workload runs once (--tracker fresh runs both passes)"
        )
    ahead = passes.ahead(plan, staging, "r2") if plan.options.repeat > 1 else None
    try:
        # a reused or given tracker output, copied into the attempt (a full disk here keeps
        # its evidence as any other failure does)
        plan = replace(plan, tracker=trackers.staged(plan.tracker, staging.root / USED_TRACKER))
        if not plan.in_process:
            facts = replace(facts, run_iket_argv=runiket.profile_argv(plan, staging.capture_dir))
        with attempt.logged(staging, plan, facts.run_iket_argv, reporter) as transcript:
            # Each line one step; the facts grow a step at a time, so that a step that fails
            # leaves those of the steps before it to the evidence (DIR.failed/manifest.json).
            at = Attempt(plan, staging, transcript, deadline, cancel)
            decoded = Decoded(transcript, formats, cancel, prestarted)
            if plan.in_process:
                facts = in_process.run(at, facts)
                facts = replace(facts, postprocess_s=_decode(at, decoded))
                facts = replace(facts, completeness=in_process.judged(at, facts.window))
            else:
                if plan.extract is not None:
                    facts = replace(facts, extract=saved_calls.prepare(at))
                    plan = saved_calls.rechosen(plan, staging, staging.root / USED_TRACKER, reporter)
                    at = replace(at, plan=plan)
                    facts = replace(facts, run_iket_argv=runiket.profile_argv(plan, staging.capture_dir))
                facts = replace(facts, passes=_passes(at, repeat_1=ahead is not None))
                _passes_failed(at, facts.passes)
                misfit = reuse.misfit(plan, staging)  # before the decode: it reads the passes' files
                facts = replace(
                    facts,
                    annotations=attempt.collect_annotations(plan, staging, facts.started.timestamp()),
                )
                facts = replace(facts, postprocess_s=_decode(at, decoded))
                if plan.options.overhead:
                    facts = replace(facts, overhead=overhead_run.run(at))
                facts = replace(facts, drift=[*misfit, *_drift(staging, transcript)])
                facts = replace(facts, completeness=completeness.check(at))
                if not facts.drift:
                    reuse.keep(at)
                if plan.options.repeat > 1:
                    facts = replace(
                        facts, repeats=_repeats(at, facts, decoded, ahead), postprocess_s=decoded.seconds
                    )
                if facts.extract is not None:
                    facts = replace(facts, extract=saved_calls.checked(facts.extract, staging, transcript))
        if transcript.full is not None:
            raise transcript.full
        published = publish.publish(plan, staging, facts, formats, reporter, publishing, decoded)
    except (IketError, OSError) as error:
        unwritten = transcript.unwritten if transcript is not None else ()
        failure = attempt.explained(error, plan, facts, formats, transcript)
        raise attempt.keep_evidence(plan, staging, facts, failure, unwritten) from None
    finally:
        if ahead is not None:
            ahead.close()  # once more if the repeats closed it: a no-op then
        if prestarted is not None:
            prestarted.close()
    if published.manifest["status"] == Status.PARTIAL and plan.options.strict:
        failed = [r for r in published.manifest["repeats"] if r["status"] == repeats.FAILED]
        raise CaptureError(
            f"{len(failed)} of {plan.options.repeat} repeats failed: {failed[0]['error']}",
            phase="capture",
            hint=f"the other repeats are in {published.output_dir} (status partial); the log says more",
        )
    _incomplete(published, reporter, strict=plan.options.strict)
    if facts.drift:
        reporter.warn(f"the passes differ, the capture is suspect: {facts.drift[0]}", runiket.DRIFT_HINT)
        if plan.options.strict:
            raise CaptureError(
                f"the tracker and capture passes differ ({len(facts.drift)} difference(s)): {facts.drift[0]}",
                phase="capture",
                hint=f"{runiket.DRIFT_HINT}; the capture is in {published.output_dir}, marked suspect",
                details=facts.drift[1:],
            )
    return published


def _decode(at: Attempt, decoded: Decoded) -> float | None:
    """The capture folder decoded (a failure raises); the seconds all decodes took so far
    (None: nothing was decoded)."""
    decoded(at.staging.capture_dir)
    return decoded.seconds


def _passes(at: Attempt, *, repeat_1: bool) -> PassResult:
    """run-iket's passes: the tracker's unless reused, then the capture's."""
    if repeat_1:
        at.transcript.reporter.phase(f"repeat 1 of {at.plan.options.repeat}")
    with stdin.Forwarder(warm.socket_dir(at.staging.token) / STDIN_SOCKET) as forwarder:
        return passes.capture(
            at.plan,
            at.staging,
            at.transcript,
            deadline=at.deadline,
            cancel=at.cancel,
            extra_env=forwarder.env,
        )


def _passes_failed(at: Attempt, ran: PassResult) -> None:
    """Raise the passes' failure, if any: a damaged replay's as such, one that a reused
    tracker caused as :class:`reuse.StaleTracker` (the capture is made again)."""
    failure = ran.failure()
    if failure is None:
        return
    failure = saved_calls.damaged(at.plan, at.staging) or failure
    if at.plan.tracker.mode == TRACKER_REUSED and reuse.capture_failed(failure):
        raise reuse.StaleTracker(f"the capture pass failed: {failure.message}", at.plan.tracker)
    raise failure


def _repeats(at: Attempt, facts: Facts, decoded: Decoded, ahead: warm.Standby | None) -> list[repeats.Repeat]:
    """Repeat 1 (the passes above) and repeats 2..N, each decoded as it ends."""
    return [repeats.first(facts.passes, facts.drift), *repeats.more(at, decoded, ahead)]


def _incomplete(published: Capture, reporter: Reporter, *, strict: bool) -> None:
    """Each loss said once the capture is published (the summary says the first again, beside
    the numbers); ``--strict`` makes them an error."""
    losses = losses_of(published.manifest)
    for loss in losses:
        reporter.warn(f"INCOMPLETE: {loss['message']}", loss["fix"] or None)
    if losses and strict:
        raise IncompleteCapture(
            headline(published.manifest) or "",
            published=published.output_dir,
            phase="capture",
            hint=f"the capture is in {published.output_dir}, its losses in manifest.json (completeness)",
        )


def _preload() -> None:
    """Import what decoding and the reports need (NVIDIA's decoder; numpy for the trace
    reader) while this process only waits for the passes, so the decode does not wait."""
    decoder.preload()
    from ..analysis import overhead  # noqa: F401  (each import here is one the CLI need not wait for)
    from ..model import numscan  # noqa: F401  (numpy's import)
    from . import finish  # noqa: F401  (the lint, the report and their readers)


def _drift(staging: Staging, transcript: Transcript) -> list[str]:
    """What differs between the passes (needs the intermediates: before they go)."""
    drifted = drift.check(staging.capture_dir)
    for problem in drifted:
        transcript.write(f"[iket] pass drift: {problem}")
    return drifted
