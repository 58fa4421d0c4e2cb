"""What the installed run-iket can do, by release, in one place: the oldest release iket runs
with, its in-process session's C ABI, the largest per-warp budget the session survives, how
many windows one process may open, and which design of the C calls iket uses. Each figure was
measured on a GPU (how and where: docs/capture.md, "What NVIDIA's session survives"; the
bisect that measures them: ``scripts/gpu_session_bisect.py``). The toolchain lookup, the
session, the windows, the pytest plugin, ``%%iket``, doctor and the messages read it here; no
other module states a run-iket release.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..errors import UsageError

#: The distribution that ships run-iket, and the oldest release iket runs with.
DISTRIBUTION = "nvidia-cutlass-dsl-libs-base"
MINIMUM = (4, 8)
MINIMUM_TEXT = ".".join(map(str, MINIMUM))

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


#: run-iket 4.8.1 (H100, driver 580.159.04; docs/capture.md, "What NVIDIA's session survives"):
#: twelve windows in one process lived with every design of the C calls, CUDA modules loaded
#: before, between and inside windows; one kept handle is the design (one Create a process).
#: Above 256 timestamps a warp, a kernel that fills the budget killed its process unless the
#: device buffer was sized to its warps, so a window stays at 256 unless told otherwise.
RELEASES = {
    "4.8": SessionFacts(release="4.8.1", abi_major=1, safe_max_ts=256, windows_per_process=None, design=KEPT),
}
#: What an unknown later release is taken to do until measured: the newest facts known.
LATEST = RELEASES["4.8"]
#: What to install: the newest release measured.
INSTALL = f"{DISTRIBUTION}>={LATEST.release}"


def facts_for(version: str | None) -> SessionFacts:
    """The facts of run-iket ``version`` (``4.8.1``; None or unknown: :data:`LATEST`)."""
    if version:
        for release, facts in RELEASES.items():
            if version == release or version.startswith(release + "."):
                return facts
    return LATEST


#: A machine whose session behaves otherwise than measured: windows one process may open
#: (``1``: pytest --iket runs each window test in a child, %%iket refuses a second window).
WINDOWS_ENV = "IKET_CLI_SESSION_WINDOWS"
#: ... and the design of the C calls (``per-window``: a new session each window).
DESIGN_ENV = "IKET_CLI_SESSION_DESIGN"


def installed(env: Mapping[str, str] | None = None) -> SessionFacts:
    """The facts of the run-iket installed beside this Python (its libs-base distribution),
    with what :data:`WINDOWS_ENV` and :data:`DESIGN_ENV` say of this machine."""
    from importlib import metadata

    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        version = None
    return overridden(facts_for(version), os.environ if env is None else env)


def overridden(facts: SessionFacts, env: Mapping[str, str]) -> SessionFacts:
    """``facts`` with the windows a process and the design ``env`` gives, checked."""
    windows, design = env.get(WINDOWS_ENV, "").strip(), env.get(DESIGN_ENV, "").strip()
    if windows:
        if not (windows == "any" or (windows.isascii() and windows.isdigit() and int(windows) >= 1)):
            raise UsageError(f"{WINDOWS_ENV}={windows!r} is not a number of windows",
                             hint="a whole number from 1, or 'any'")  # fmt: skip
        facts = replace(facts, windows_per_process=None if windows == "any" else int(windows))
    if design:
        if design not in (KEPT, PER_WINDOW):
            raise UsageError(f"{DESIGN_ENV}={design!r} is not a design", hint=f"{KEPT} or {PER_WINDOW}")
        facts = replace(facts, design=design)
    return facts
