"""The one exception family of iket, and the one table of exit codes.

Everything below the click layer raises a subclass of :class:`IketError`; the CLI turns
it into a one-line message (plus an optional hint) and an exit code in exactly one place
(``iket_cli.cli.main``). The Python API lets the same exceptions propagate. Every layer
may import this module; it imports nothing of iket's.
"""

from __future__ import annotations

import enum
import signal


class ExitCode(enum.IntEnum):
    """Exit codes of the ``iket`` command. Documented in docs/faults.md; never renumber."""

    OK = 0
    #: The workload or the capture failed (a pass exited non-zero, no instrumented kernel,
    #: a requested artifact is missing, the trace budget is exceeded); also a failed job of
    #: ``iket run``, a regression found by ``iket diff``, a finding of ``iket lint --strict``.
    FAILED = 1
    #: Bad usage: an unknown option, a missing target, a refused output directory, an
    #: unusable environment (no run-iket, run-iket too old, CUDA_INJECTION64_PATH set).
    USAGE = 2
    #: ``--timeout`` expired; the whole process tree was killed.
    TIMEOUT = 124
    #: The terminal hung up (SIGHUP: an ssh connection dropped); handled as SIGTERM is.
    HANGUP = 129
    #: Interrupted by SIGINT (Ctrl-C). SIGTERM gives 143, as shells report it.
    INTERRUPTED = 130
    #: SIGQUIT (Ctrl-\ at a terminal); handled as SIGTERM is.
    QUIT = 131
    #: Killed by SIGKILL (``kill -9``, the OOM killer, a preemption): the shell reports it;
    #: iket cannot. Its watchdog stopped the capture's processes and kept the evidence.
    KILLED = 137
    #: Terminated by SIGTERM (a scheduler's or ``kill``'s default); the process tree was stopped.
    TERMINATED = 143


class Status:
    """The manifest's ``status`` words, beside the exit codes: what a capture's manifest says
    of it (docs/manifest.md). ``suspect``: the passes drifted; ``partial``: a repeated
    capture some of whose repeats failed; ``failed``, ``timeout`` and ``interrupted`` are a
    failed attempt's evidence (``DIR.failed/``). Each error names its own (``manifest_status``)."""

    OK = "ok"
    SUSPECT = "suspect"
    PARTIAL = "partial"
    FAILED = "failed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


class IketError(Exception):
    """Base of every error iket reports to its user.

    ``message`` is one line that says what went wrong; ``hint`` says what to do about it.
    ``details`` (optional) are extra lines, such as the last lines of a failed pass.
    """

    exit_code: int = ExitCode.FAILED
    #: What the manifest of an attempt that ended with this error says of it.
    manifest_status: str = Status.FAILED

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        details: list[str] | None = None,
        exit_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = list(details or [])
        #: Where the evidence of a failed capture was kept (``DIR.failed/``), if anywhere.
        self.failed_dir = None
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class UsageError(IketError):
    """The command line or the API call cannot be carried out as given."""

    exit_code = ExitCode.USAGE


class TargetError(UsageError):
    """The target (script, function, module or command) does not exist or is unusable."""


class OutputDirError(UsageError):
    """The output directory is refused (a previous capture, unsafe, or locked)."""


class ToolchainError(UsageError):
    """run-iket is missing, too old, or the environment cannot host an IKET capture."""


class SpawnError(ToolchainError):
    """A program could not be started (or gave no answer in time); ``command`` is it, quoted."""

    def __init__(self, message: str, *, command: str = "", **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.command = command


class CaptureError(IketError):
    """The workload or run-iket failed. ``phase`` names the pass that failed."""

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, *, phase: str | None = None, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.phase = phase


class InjectionCrash(CaptureError):
    """A pass's workload died by a signal inside run-iket's injection, with no Python error of
    its own: NVIDIA's tool failed, not the user's code (run-iket aborts on half-precision
    cuBLAS GEMMs). The attempt adds the injection log's warnings, once it is kept."""


class DecodeError(CaptureError):
    """A raw capture could not be decoded (missing, truncated or corrupt files)."""


class SessionError(CaptureError):
    """IKET's in-process session refused a call (``call``: Start, SaveTrace, ...; ``result``: the
    C ABI's code, named in the message), or a second session was asked for in one process."""

    def __init__(self, message: str, *, call: str, result: int | None = None, **kwargs) -> None:
        super().__init__(message, phase="window", **kwargs)
        self.call = call
        self.result = result


class IncompleteCapture(CaptureError):
    """``--strict``: the capture was published, but IKET lost some of its data (its manifest's
    completeness record says what); ``iket run`` calls such a job ``incomplete``. ``published``:
    the capture's folder (``--json`` prints its manifest)."""

    def __init__(self, message: str, *, published=None, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.published = published


class NoInstrumentedKernelError(CaptureError):
    """The tracker pass saw no IKET-instrumented kernel launch."""


class CaptureTimeout(CaptureError):
    """``--timeout`` expired and the process tree was killed."""

    exit_code = ExitCode.TIMEOUT
    manifest_status = Status.TIMEOUT


class CaptureInterrupted(CaptureError):
    """SIGINT or SIGTERM arrived; the process tree was stopped."""

    exit_code = ExitCode.INTERRUPTED
    manifest_status = Status.INTERRUPTED

    @classmethod
    def by(cls, signum: signal.Signals, what: str, **kwargs) -> CaptureInterrupted:
        """``interrupted by SIGTERM<what>``, exiting 128 + the signal as a shell reports it."""
        return cls(f"interrupted by {signum.name}{what}", exit_code=128 + signum, **kwargs)


class CaptureKilled(CaptureInterrupted):
    """The CLI was killed outright; only its watchdog could clean up (recorded in DIR.failed/)."""

    exit_code = ExitCode.KILLED


class DiskFullError(CaptureError):
    """The disk (or quota) holding the capture is full."""


class Terminated(BaseException):
    """Raised in the main thread by iket's handler of SIGTERM, SIGHUP or SIGQUIT (``signum``),
    as KeyboardInterrupt is for SIGINT; turned into :class:`CaptureInterrupted` (exit 128 +
    the signal: 143, 129, 131)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = signal.Signals(signum)


def signal_of(interruption: BaseException) -> signal.Signals:
    """The signal an interruption stands for: its own for :class:`Terminated`, else SIGINT
    (Ctrl-C, or a cancel asked for by the Python API's caller)."""
    return interruption.signum if isinstance(interruption, Terminated) else signal.SIGINT


class MultiProcessError(UsageError):
    """A single artifact was asked of a capture that holds several processes."""


class ManifestError(IketError):
    """A manifest is missing, unreadable or does not follow the schema."""

    exit_code = ExitCode.USAGE
