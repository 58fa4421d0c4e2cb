"""The in-process IKET session: a ctypes binding of run-iket's stable C ABI.

run-iket ships ``iket/include/iket/iket_profiling_session.h`` (ABI 1.0), exported by
``iket/profiler/libiket_injection.so`` beside the installed run-iket: a session patches the
kernels launched between ``Start`` and ``Stop`` in the live process and ``SaveTrace`` writes the
trace JSON run-iket's decoder writes (docs/capture.md, "In the live process").
ctypes, not a compiled extension: nothing to build at install. Each call's result is checked
and named; the header allows one active session per process, and so does this module.

The library links ``libcuda.so.1``: it loads only where a driver is installed.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import SessionError, ToolchainError, UsageError
from ...model import runiket_facts
from ...model.runiket_facts import KEPT

#: The ABI this binding was written against; a library of another major version is refused.
ABI_MAJOR = 1
#: Where the library lies inside the folder that holds the ``iket`` package (``dsl_packages``).
LIBRARY = Path("iket") / "profiler" / "libiket_injection.so"
#: ``SaveTrace`` could not write its file (a full disk, a folder gone).
IO_ERROR = 13
#: The header's result codes, by name (``IKET_PROFILING_SESSION_*``).
RESULTS = {
    0: "SUCCESS",
    1: "INVALID_ARGUMENT",
    2: "FEATURE_NOT_SUPPORTED",
    3: "NOT_IMPLEMENTED",
    4: "NOT_INSTRUMENTED",
    5: "UNKNOWN_ERROR",
    6: "INVALID_EVENT_RECORD",
    7: "NO_INSTRUMENT_CONFIG",
    8: "INVALID_STATE",
    9: "DUPLICATE_OPERATION",
    13: "IO_ERROR",
    14: "INTERNAL_ERROR",
}
#: ``OptionsInit``'s budget of timestamps per warp, in effect unless set.
DEFAULT_MAX_TS = runiket_facts.LATEST.default_max_ts
#: ``1`` asks a session for more than the budget it is known to survive anyway, at the process's risk.
UNSAFE_BUDGET_ENV = "IKET_CLI_SESSION_BUDGET_UNSAFE"
#: ``flags``: trace one cluster, keep buffers on the device until Stop, warp lifetimes only.
ENABLE_CLUSTER, DEFER_TRACE_READBACK, WARP_LIFETIME_ONLY = 1, 2, 4
#: ``log_level`` values, by run-iket's names (vocab.LOG_LEVELS).
LOG_LEVELS = {"error": 0, "warn": 1, "info": 2}


class Options(ctypes.Structure):
    """``IketProfilingSessionOptions``, the 56-byte v1.0 prefix (fields append-only)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("max_ts_per_warp", ctypes.c_uint64),
        ("device_buffer_size", ctypes.c_uint64),
        ("profiled_cuda_contexts", ctypes.c_void_p),
        ("num_profiled_cuda_contexts", ctypes.c_uint64),
        ("cluster_x", ctypes.c_uint32),
        ("cluster_y", ctypes.c_uint16),
        ("cluster_z", ctypes.c_uint16),
        ("log_level", ctypes.c_uint32),
    ]


@dataclass(frozen=True)
class Settings:
    """What a session is asked for; None keeps the library's default (``OptionsInit``: 256
    timestamps per warp, a 512 MiB device buffer)."""

    max_ts_cnt_per_warp: int | None = None
    #: The device buffer's size in bytes.
    context_buffer_size: int | None = None
    log_level: str = "info"
    warp_lifetime_only: bool = False
    defer_trace_readback: bool = False
    cluster: tuple[int, int, int] | None = None

    def apply(self, options: Options) -> None:
        """Write these settings over the library's defaults in ``options``."""
        if self.max_ts_cnt_per_warp is not None:
            options.max_ts_per_warp = self.max_ts_cnt_per_warp
        if self.context_buffer_size is not None:
            options.device_buffer_size = self.context_buffer_size
        options.log_level = LOG_LEVELS[self.log_level]
        options.flags |= WARP_LIFETIME_ONLY * self.warp_lifetime_only
        options.flags |= DEFER_TRACE_READBACK * self.defer_trace_readback
        if self.cluster is not None:
            options.flags |= ENABLE_CLUSTER
            options.cluster_x, options.cluster_y, options.cluster_z = self.cluster


def check_budget(max_ts: int | None, asked_as: str, env: Mapping[str, str] | None = None) -> None:
    """Refuse, before anything runs, a per-warp budget the installed run-iket's session is known
    to kill its process with (:mod:`~iket_cli.model.runiket_facts`); ``asked_as`` names the
    option as the user gave it."""
    facts = runiket_facts.installed()
    if max_ts is None or max_ts <= facts.safe_max_ts:
        return
    if (os.environ if env is None else env).get(UNSAFE_BUDGET_ENV) == "1":
        return
    said = f"{asked_as}{max_ts}" if asked_as.endswith("=") else f"{asked_as} {max_ts}"
    raise UsageError(
        f"{said} in an in-process session: run-iket {facts.release}'s session kills its process "
        f"with more than {facts.safe_max_ts} timestamps a warp unless its device buffer is sized to "
        "the kernel's warps",
        hint="capture kernels that emit more with the two passes (iket profile without --one-pass or "
        "--window; --extract for one call), whose tracker pass sizes the budget and the buffer; "
        f"{UNSAFE_BUDGET_ENV}=1 with a --context-buffer-size of launches x warps x (8 x budget + 64) "
        "bytes tries anyway, at the process's risk",
    )


#: The header's bound on ``max_ts_per_warp`` ([1, UINT32_MAX]).
MAX_TS_BOUND = (1 << 32) - 1


def budget_of(value: Any, asked_as: str) -> int | None:
    """A per-warp budget as given to the API, ``%%iket`` or a pytest mark, checked as the CLI's
    ``--max-ts-cnt-per-warp`` is (a whole number in [1, 2**32-1]); None keeps the library's."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TS_BOUND:
        raise UsageError(
            f"{asked_as}{value!r} is not a budget of timestamps per warp",
            hint=f"a whole number from 1 to {MAX_TS_BOUND}, or none for the library's {DEFAULT_MAX_TS}",
        )
    return value


def buffer_of(value: Any, asked_as: str) -> int | None:
    """A device buffer size given as bytes or as the CLI takes it (``512M``), checked (at least 1
    byte); None keeps the library's."""
    if value is None:
        return None
    if isinstance(value, str):
        from ...model.units import parse_size

        value = parse_size(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(
            f"{asked_as}{value!r} is not a buffer size",
            hint="a number of bytes, or with k, M or G: e.g. 512M",
        )
    return value


def settings_for(
    max_ts_cnt_per_warp: Any = None,
    context_buffer_size: Any = None,
    log_level: str = "info",
    *,
    warp_trace: bool = False,
    enabled_cluster: str | tuple[int, int, int] | None = None,
    spelled: str = "{}=",
) -> Settings:
    """The one mapping from what a capture asks of a session (the CLI's options, the API's,
    ``%%iket``'s and a pytest mark's arguments) to its :class:`Settings`, each value checked;
    ``spelled`` names an option as the caller's user wrote it (``--{}`` for the CLI)."""
    budget = budget_of(max_ts_cnt_per_warp, spelled.format("max_ts_cnt_per_warp"))
    buffer = buffer_of(context_buffer_size, spelled.format("context_buffer_size"))
    if log_level not in LOG_LEVELS:
        raise UsageError(f"unknown log_level {log_level!r}", hint=", ".join(LOG_LEVELS))
    cluster = enabled_cluster
    if isinstance(cluster, str):
        cluster = tuple(int(part) for part in cluster.split(","))  # type: ignore[assignment]
    return Settings(budget, buffer, log_level, warp_trace, cluster=cluster)  # type: ignore[arg-type]


#: The session library to load instead of run-iket's (a stand-in in the tests, a build of one's own).
LIBRARY_ENV = "IKET_CLI_SESSION_LIBRARY"


def find_library(given: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
                 dsl_packages: str | Path | None = None) -> Path:  # fmt: skip
    """The session library: ``given``, else ``$IKET_CLI_SESSION_LIBRARY``, else the one beside
    run-iket (:func:`library_path`; for this Python's own libs-base where ``dsl_packages`` is None)."""
    chosen = given or (os.environ if env is None else env).get(LIBRARY_ENV)
    if chosen:
        return Path(chosen)
    if dsl_packages is None:
        from ...system.toolchain import own_distribution

        dsl_packages = own_distribution()[1]
    return library_path(dsl_packages)


def library_path(dsl_packages: str | Path | None) -> Path:
    """The session library beside the installed run-iket (its ``dsl_packages`` folder), else
    beside the ``iket`` package this Python finds (a libs-base put on ``PYTHONPATH``)."""
    if dsl_packages is not None and (Path(dsl_packages) / LIBRARY).is_file():
        return Path(dsl_packages) / LIBRARY
    import importlib.util

    try:
        found = importlib.util.find_spec(LIBRARY.parts[0])
    except (ImportError, ValueError):
        found = None
    for folder in (found.submodule_search_locations or []) if found else []:
        if (Path(folder).parent / LIBRARY).is_file():
            return Path(folder).parent / LIBRARY
    raise ToolchainError(
        f"run-iket's in-process session library ({LIBRARY}) is not installed here",
        hint=f"pip install '{runiket_facts.INSTALL}'",
    )


def load(path: Path) -> Any:
    """The library, its ABI version checked; a :class:`ToolchainError` that says why not."""
    try:
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as error:
        raise ToolchainError(
            f"cannot load {path}: {error}",
            hint="the in-process session needs the NVIDIA driver (libcuda.so.1): run it on the GPU machine",
        ) from None
    return checked(lib, path)


def checked(lib: Any, path: Path | str) -> Any:
    """``lib`` when it speaks ABI 1.x; a :class:`ToolchainError` naming the version otherwise."""
    major, minor, result = abi_version(lib, path)
    if result != 0 or major != ABI_MAJOR:
        raise ToolchainError(
            f"{path} speaks session ABI {major}.{minor} (result {result}); iket speaks {ABI_MAJOR}.x",
            hint=f"pip install '{runiket_facts.INSTALL}' (the release this iket supports)",
        )
    return lib


def abi_version(lib: Any, path: Path | str) -> tuple[int, int, int]:
    """The library's session ABI (major, minor) and the call's result."""
    major, minor = ctypes.c_uint32(), ctypes.c_uint32()
    try:
        result = lib.IketProfilingSessionGetApiVersion(ctypes.pointer(major), ctypes.pointer(minor))
    except AttributeError:
        older = f"run-iket older than {runiket_facts.MINIMUM_TEXT}"
        raise ToolchainError(f"{path} has no in-process session ({older})") from None
    return major.value, minor.value, result


#: The handle each library keeps for the life of the process under the kept design, by library.
_kept: dict[str, ctypes.c_void_p] = {}


class Session:
    """One window's session: :meth:`start` (OptionsInit, SetOptions, Start), :meth:`stop`,
    :meth:`save`, :meth:`close`. How a window uses the C ABI is ``design``
    (:mod:`~iket_cli.model.runiket_facts`): ``per-window`` creates a session at start and
    destroys it at close; ``kept`` creates one at the process's first window, keyed by ``key``
    (the library's path), and at close clears its trace data for the next window, never
    destroying it. A context manager: leaving it stops the session (patched kernels restored)
    and closes it however the block ends."""

    _active: Session | None = None
    _lock = threading.Lock()

    def __init__(
        self, lib: Any, settings: Settings = Settings(), *, design: str | None = None, key: str = ""
    ) -> None:
        self.lib = lib
        self.settings = settings
        #: ``design`` where given, else the installed run-iket's (:mod:`~iket_cli.model.runiket_facts`).
        self.design = design or runiket_facts.installed().design
        self.key = key or str(id(lib))
        self.handle = ctypes.c_void_p()
        self.running = False
        #: What the session ran with, the library's defaults filled in (the manifest's ``window``).
        self.applied: dict[str, Any] = {}

    def start(self) -> Session:
        with Session._lock:
            if Session._active is not None:
                raise SessionError(
                    "another IKET session is active in this process: the library allows one at a time",
                    call="Start",
                    hint="end the first window before opening another",
                )
            Session._active = self
        try:
            self._handle()
            options = Options()
            options.struct_size = ctypes.sizeof(Options)
            self._call("OptionsInit", ctypes.pointer(options))
            self.settings.apply(options)
            self.applied = {
                "max_ts_cnt_per_warp": options.max_ts_per_warp,
                "context_buffer_size": options.device_buffer_size,
                "log_level": self.settings.log_level,
                "flags": options.flags,
            }
            self._call("SetOptions", self.handle, ctypes.pointer(options))
            self._call("Start", self.handle)
        except BaseException:
            self.close()
            raise
        self.running = True
        return self

    def stop(self) -> None:
        """Collect the trace data and restore the patched kernels."""
        if self.running:
            self.running = False
            self._call("Stop", self.handle)

    def save(self, path: Path) -> Path:
        """Write the trace JSON of what the session collected to ``path``."""
        self._call("SaveTrace", self.handle, str(path).encode())
        return path

    def _handle(self) -> None:
        """The session to start: this process's kept one, else a new one."""
        if self.design == KEPT and self.key in _kept:
            self.handle = _kept[self.key]
            return
        self._call("Create", ctypes.pointer(self.handle))
        if self.design == KEPT:
            _kept[self.key] = self.handle

    def close(self) -> None:
        """Stop (where running) and close the session: destroyed (per window), or its trace data
        cleared for the next window (kept). The process may open another window."""
        try:
            if self.handle.value and self.design == KEPT:
                self._clear()
            elif self.handle.value:
                self.running = False
                self._call("Destroy", self.handle)
        finally:
            self.handle = ctypes.c_void_p()
            with Session._lock:
                if Session._active is self:
                    Session._active = None

    def _clear(self) -> None:
        """Stop a kept session where running and clear its trace data; one that refuses is
        forgotten and destroyed, so that the next window starts a new one, not this window's data."""
        try:
            if self.running:
                self.running = False
                self._call("Stop", self.handle)
            self._call("ClearTraceData", self.handle)
        except SessionError:
            _kept.pop(self.key, None)
            self.lib.IketProfilingSessionDestroy(self.handle)
            raise

    def _call(self, name: str, *args: Any) -> None:
        result = getattr(self.lib, f"IketProfilingSession{name}")(*args)
        if result != 0:
            raise SessionError(
                f"IKET's session refused {name}: {RESULTS.get(result, 'result')} ({result})",
                call=name,
                result=result,
            )

    def __enter__(self) -> Session:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.close()
