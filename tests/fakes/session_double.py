"""A stand-in for ``libiket_injection.so``'s session C ABI (it needs a GPU driver to load), at
the ctypes boundary: the same function names and pointer arguments, and what the H100 showed
(``docs/gpu/issue51_h100/``, ``scripts/gpu_session_probe.py``): API version 1.0; ``OptionsInit``
fills flags 0, 256 timestamps per warp, a 512 MiB buffer and log level 1; every call returns 0;
``SaveTrace`` writes one trace JSON (here: the one the H100 saved for the seed kernel)."""

from __future__ import annotations

import shutil
from pathlib import Path

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "session" / "plain.trace.json"


class SessionLibrary:
    """Records every call; ``fail`` maps a call's name to the result it returns instead of 0."""

    def __init__(self, fail: dict[str, int] | None = None, version: tuple[int, int] = (1, 0)) -> None:
        self.fail = fail or {}
        self.version = version
        self.calls: list[str] = []
        self.options: dict[str, int] = {}
        self.next_handle = 0x1000

    def _result(self, name: str) -> int:
        self.calls.append(name)
        return self.fail.get(name, 0)

    def IketProfilingSessionGetApiVersion(self, major, minor) -> int:
        major.contents.value, minor.contents.value = self.version
        return 0

    def IketProfilingSessionOptionsInit(self, options) -> int:
        o = options.contents
        o.flags, o.max_ts_per_warp, o.device_buffer_size, o.log_level = 0, 256, 536870912, 1
        return self._result("OptionsInit")

    def IketProfilingSessionCreate(self, handle) -> int:
        result = self._result("Create")
        if result == 0:
            handle.contents.value = self.next_handle
        return result

    def IketProfilingSessionSetOptions(self, handle, options) -> int:
        o = options.contents
        self.options = {name: getattr(o, name) for name, _ in o._fields_ if name != "profiled_cuda_contexts"}
        return self._result("SetOptions")

    def IketProfilingSessionStart(self, handle) -> int:
        return self._result("Start")

    def IketProfilingSessionStop(self, handle) -> int:
        return self._result("Stop")

    def IketProfilingSessionSaveTrace(self, handle, path: bytes) -> int:
        result = self._result("SaveTrace")
        if result == 0:
            shutil.copy(TRACE, path.decode())
        return result

    def IketProfilingSessionClearTraceData(self, handle) -> int:
        return self._result("ClearTraceData")

    def IketProfilingSessionDestroy(self, handle) -> int:
        return self._result("Destroy")
