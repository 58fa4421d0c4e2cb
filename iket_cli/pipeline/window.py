"""``iket_cli.window``: capture what a block of the user's own process runs, in that process.

No relaunch, no tracker pass: NVIDIA's in-process session (:mod:`iket_cli.capture.in_process.session`)
is started around the block and stopped after it; its trace JSON is finished like any
capture's — the Perfetto trace from the JSON (:mod:`iket_cli.render.perfetto`), the HTML
report, lint, the completeness record, a manifest — in a staging folder beside DIR, then
published atomically (DIR replaced only with ``clobber=True``). A block that raises keeps its
evidence in ``DIR.failed/`` and the exception goes on. The injection's own lines go to the
capture's ``iket.log``, not to the terminal or the notebook.

Several windows in one process are several captures, one after another (the library allows
one session at a time): each needs a folder of its own, or ``clobber=True``; ``{n}`` in DIR
is replaced by the window's number in this process (``"iket-step{n}"``). As a decorator,
each call of the function is a window. Where the session kills its process in a later window
(:mod:`iket_cli.model.runiket_facts`: not the measured release's; ``IKET_CLI_SESSION_WINDOWS=1`` says
so of a machine), a later window is refused before it opens, saying how to capture it (a
process of its own a window: ``pytest --iket`` does so by itself, ``%%iket --isolate``,
``iket profile --window``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import os
import sys
import time
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..capture import outdir, runiket
from ..capture.in_process import live
from ..capture.in_process import session as session_mod
from ..capture.staging import Staging, remove_stale
from ..errors import CaptureError, IketError, SessionError, UsageError
from ..model import runiket_facts
from ..model.vocab import POSTPROCESS_CHOICES, formats_for
from ..system import fdsplit, filesystem
from .capture import Capture
from .window_finish import Closed, evidence, finished

DEFAULT_DIR = "iket-window"
#: Windows opened in this process so far (``{n}`` in DIR).
_numbers = itertools.count(1)
#: Where the first window of this process whose session started was opened (empty: none yet).
_started: list[str] = []
#: This process's published windows, in order: ``{"number", "folder"}`` (each manifest lists the
#: ones before it, so that a report and ``iket show`` say where the others are).
_published: list[dict[str, Any]] = []


class Window:
    """A window: ``with iket_cli.window("DIR") as w: ...`` then ``w.capture``, or
    ``@iket_cli.window("DIR{n}")`` on a function. Options as ``iket profile``'s of the same
    names; ``max_ts_cnt_per_warp`` and ``context_buffer_size`` default to the library's (256
    timestamps a warp, 512 MiB)."""

    def __init__(
        self,
        output_dir: str | os.PathLike = DEFAULT_DIR,
        *,
        clobber: bool = False,
        postprocess: str = "all",
        max_ts_cnt_per_warp: int | None = None,
        context_buffer_size: int | str | None = None,
        log_level: str = runiket.DEFAULT_LOG_LEVEL,
        library: str | os.PathLike | None = None,
        where: str | None = None,
    ) -> None:
        if postprocess not in POSTPROCESS_CHOICES:
            raise UsageError(
                f"unknown postprocess {postprocess!r}", hint=f"use one of {', '.join(POSTPROCESS_CHOICES)}"
            )
        self.settings = session_mod.settings_for(max_ts_cnt_per_warp, context_buffer_size, log_level)
        session_mod.check_budget(self.settings.max_ts_cnt_per_warp, "max_ts_cnt_per_warp=")
        self.output_dir = str(output_dir)
        self.clobber = clobber
        self.formats = formats_for(postprocess)
        self.library = library
        #: What the manifest calls the place the window was opened (default: its file:line).
        self.where = where
        live.prepare()  # a decorated function's kernels may load before its first call
        #: The last window's capture, once it is published.
        self.capture: Capture | None = None
        #: Where the window is around calls of a function (:mod:`iket_cli.hosts.calls`): which
        #: calls it was asked for and which it holds (its manifest's ``window`` says them).
        self.calls: dict[str, Any] | None = None
        self._open: _Open | None = None

    def __enter__(self) -> Window:
        if self._open is not None:
            raise CaptureError("this window is already open", phase="window", hint="nest no window in itself")
        self._open = _Open.begin(self, self.where or _caller())
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, tb: Any) -> None:
        opened, self._open = self._open, None
        if opened is not None:
            self.capture = opened.end(error)

    def __call__(self, func: Callable) -> Callable:
        if (
            inspect.isgeneratorfunction(func)
            or inspect.iscoroutinefunction(func)
            or inspect.isasyncgenfunction(func)
        ):
            raise UsageError(
                f"iket_cli.window cannot decorate {getattr(func, '__qualname__', func)}: a generator or "
                "async function runs its body after the call returns, outside the window",
                hint="open the window where the body runs: `with iket_cli.window(...):` around its loop",
            )

        @functools.wraps(func)
        def windowed(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return windowed


def window(output_dir: str | os.PathLike = DEFAULT_DIR, **options: Any) -> Window:
    """A window around a block (``with``) or each call of a function (a decorator)."""
    return Window(output_dir, **options)


def numbered(output_dir: str) -> tuple[int, str]:
    """The next window's number in this process, and ``output_dir`` with ``{n}`` made it."""
    number = next(_numbers)
    return number, output_dir.replace("{n}", str(number))


def opening_refused() -> SessionError | None:
    """Why a window may not open now (None: it may): a later window of this process where the
    installed run-iket's session (or this machine's, ``IKET_CLI_SESSION_WINDOWS``) kills its process
    in one."""
    facts = runiket_facts.installed()
    allowed = facts.windows_per_process
    if allowed is None or len(_started) < allowed:
        return None
    return SessionError(
        f"a second window in this process was not opened (the first: {_started[0]}): run-iket "
        f"{facts.release}'s in-process session can kill the process (SIGSEGV) in a later window",
        call="Start",
        hint="capture each window in a process of its own: pytest --iket does so by itself, "
        "%%iket --isolate for a self-contained cell, a restarted kernel, or iket profile --window; "
        f"{runiket_facts.WINDOWS_ENV}=any opens it anyway, at the risk of this process",
    )


def _caller() -> str:
    """``file:line`` of the code that opened the window (outside iket)."""
    frame = sys._getframe(1)
    here = Path(__file__).resolve().parent.parent
    while frame is not None and Path(frame.f_code.co_filename).resolve().is_relative_to(here):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


class _Open:
    """One open window: its folder locked and staged, its session started, the process's
    output split."""

    def __init__(self, owner: Window, number: int, where: str, output: Path) -> None:
        self.owner, self.number, self.where, self.output = owner, number, where, output
        #: The process that opened it: a child forked inside the window leaves it to this one.
        self.pid = os.getpid()
        self.started_at = datetime.now(timezone.utc)
        self.t0 = time.monotonic()
        self.lock = outdir.Lock(output)
        self.staging: Staging | None = None
        self.session: session_mod.Session | None = None
        self.splits: list[fdsplit.Split] = []
        self.window_s: float | None = None

    @classmethod
    def begin(cls, owner: Window, where: str) -> _Open:
        refused = opening_refused()
        if refused is not None:
            raise refused
        number, path = numbered(owner.output_dir)
        output = outdir.check(Path(path), cwd=Path.cwd(), clobber=owner.clobber)
        opened = cls(owner, number, where, output)
        opened.lock.acquire()
        try:
            opened._start()
        except BaseException:
            opened._discard()
            raise
        return opened

    def _start(self) -> None:
        remove_stale(self.output)
        path = session_mod.find_library(self.owner.library)
        lib = session_mod.load(path)
        self.staging = Staging.create(self.output)
        self.staging.capture_dir.mkdir()
        _warn_half_precision()
        live.synchronize()
        for fd in (1, 2):
            split = fdsplit.Split(fd, runiket.is_injection_line, self.staging.log_path)
            self.splits.append(split.__enter__())
        self.session = session_mod.Session(lib, self.owner.settings, key=str(path)).start()
        self.t_start = time.monotonic()
        _started[:] = _started or [self.where]

    def end(self, error: BaseException | None) -> Capture | None:
        """Stop and save; publish, or keep the evidence where the block raised (it goes on). A
        process forked inside the window (``os.fork``) that leaves the block touches nothing:
        the window, its session and its folder are the parent's."""
        if os.getpid() != self.pid:
            return None
        try:
            try:
                trace = self._stop()
            except IketError as failure:  # Stop or SaveTrace refused: what there is, kept
                self._keep_evidence(error or failure)
                raise
            if error is not None:
                self._keep_evidence(error)
                return None
            try:
                return self._publish(trace)
            except OSError as failure:  # a full disk, a folder gone: said in one line, evidence kept
                said = filesystem.from_os_error(failure, self.output.parent)
                self._keep_evidence(said)
                raise said from None
            except IketError as failure:  # the report or a full disk: the evidence is kept
                self._keep_evidence(failure)
                raise
        finally:
            self._discard()

    def _stop(self) -> Path:
        assert self.staging is not None and self.session is not None
        try:
            live.synchronize()
        finally:
            self.window_s = round(time.monotonic() - self.t_start, 3)
            with live.signals_held():  # a second Ctrl-C waits: the trace is saved first
                try:
                    self.session.stop()
                    trace = self.staging.capture_dir / f"iket_pid_{os.getpid():#x}.trace.json"
                    self._save(trace)
                finally:
                    self.session.close()
                    self._unsplit()
        return trace

    def _save(self, trace: Path) -> None:
        """SaveTrace; its I/O error on a full disk said as the full disk it is."""
        assert self.session is not None
        try:
            self.session.save(trace)
        except SessionError as refused:
            if refused.result == session_mod.IO_ERROR and filesystem.nearly_full(trace.parent):
                raise filesystem.disk_full(trace.parent, writing="the window's trace") from None
            raise

    def _closed(self) -> Closed:
        assert self.staging is not None
        return Closed(
            staging=self.staging,
            number=self.number,
            where=self.where,
            started_at=self.started_at,
            t0=self.t0,
            window_s=self.window_s,
            formats=tuple(self.owner.formats),
            log_level=self.owner.settings.log_level,
            applied=dict(self.session.applied) if self.session is not None else {},
            earlier=tuple(_published),
            calls=self.owner.calls,
        )

    def _publish(self, trace: Path) -> Capture:
        record = finished(self._closed(), trace)
        assert self.staging is not None
        folder = self.staging.publish(clobber=self.owner.clobber)
        _published.append({"number": self.number, "folder": str(folder.resolve())})
        return Capture(folder, record)

    def _keep_evidence(self, error: BaseException) -> None:
        """What the window saved, kept in ``DIR.failed/`` with a manifest that says ``error``
        (on a full disk the manifest may not fit: the folder is kept without it)."""
        with contextlib.suppress(OSError):
            evidence(self._closed(), error)
        assert self.staging is not None
        with contextlib.suppress(OSError):
            self.staging.fail()

    def _unsplit(self) -> None:
        while self.splits:
            self.splits.pop().__exit__(None, None, None)

    def _discard(self) -> None:
        try:
            if self.session is not None:
                self.session.close()
            self._unsplit()
            if self.staging is not None:
                self.staging.discard()
        finally:
            self.lock.release()


def _warn_half_precision() -> None:
    """A half-precision GEMM inside a session aborts the process (docs/faults.md): where
    torch's autocast to a half type is on as the window opens, say so before it happens."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        on = torch.is_autocast_enabled("cuda")
        dtype = torch.get_autocast_dtype("cuda")
    except (AttributeError, TypeError, RuntimeError):
        return
    if on and dtype in (torch.float16, torch.bfloat16):
        warnings.warn(
            f"iket window opened under torch.autocast({dtype}): a half-precision cuBLAS GEMM inside an "
            "IKET session aborts the process; open the window around your instrumented kernels only",
            RuntimeWarning,
            stacklevel=4,
        )
