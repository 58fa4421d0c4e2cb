"""What the installed run-iket's in-process session can do, by release, in one place: the
session's C ABI, the largest per-warp budget it survives, how many windows one process may
open, and which design of the C calls iket uses. Each figure was measured on a GPU (how and
where: docs/capture.md, "What NVIDIA's session survives"; the bisect that measures them:
``scripts/gpu_session_bisect.py``). The session, the windows, the pytest plugin, ``%%iket``,
doctor and the messages read it here; no other module states a run-iket release.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A window's use of the C ABI: a new session for each window (Create .. Destroy), or one
#: session kept for the life of the process (Start, Stop, SaveTrace, ClearTraceData per window).
PER_WINDOW, KEPT = "per-window", "kept"


@dataclass(frozen=True)
class SessionFacts:
    """One run-iket release's in-process session, as measured."""

    #: The release these facts were measured on.
    release: str
    #: The C ABI's major version its ``libiket_injection.so`` speaks.
    abi_major: int
    #: The largest ``max_ts_per_warp`` a session was seen to survive (its own default).
    safe_max_ts: int
    #: Windows one process may open (None: any number): a later one killed the process.
    windows_per_process: int | None
    #: How each window uses the C ABI (:data:`PER_WINDOW` or :data:`KEPT`).
    design: str
    #: The defaults ``OptionsInit`` fills: timestamps a warp, device buffer bytes.
    default_max_ts: int = 256
    default_buffer: int = 512 << 20

    def more_windows_risky(self) -> bool:
        """Whether a second window in one process was seen to kill it."""
        return self.windows_per_process is not None


#: run-iket 4.8.1, on an H100 (driver 580.159.04): above 256 timestamps a warp the process died
#: (512: SIGSEGV; 2048: SIGABRT "free(): invalid next size"); a second session died (SIGSEGV at
#: its Start) once a CUDA module had been loaded after the first began. A kept session was
#: measured once only (it lived 3 of 3 with every kernel loaded first): not yet the design.
RELEASES = {
    "4.8": SessionFacts(
        release="4.8.1", abi_major=1, safe_max_ts=256, windows_per_process=1, design=PER_WINDOW
    ),
}
#: What an unknown later release is taken to do until measured: the newest facts known.
LATEST = RELEASES["4.8"]


def facts_for(version: str | None) -> SessionFacts:
    """The facts of run-iket ``version`` (``4.8.1``; None or unknown: :data:`LATEST`)."""
    if version:
        for release, facts in RELEASES.items():
            if version == release or version.startswith(release + "."):
                return facts
    return LATEST


def installed() -> SessionFacts:
    """The facts of the run-iket installed beside this Python (its libs-base distribution)."""
    from importlib import metadata

    try:
        version = metadata.version("nvidia-cutlass-dsl-libs-base")
    except metadata.PackageNotFoundError:
        version = None
    return facts_for(version)
