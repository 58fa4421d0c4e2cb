"""The CLI's standard input, handed to the pass that runs last: the capture pass.

run-iket starts each pass with the input it was given, and iket starts run-iket in a session
of its own with its input closed (a pass must not steal a terminal's keystrokes meant for
iket). ``echo data | iket profile reader.py`` would then read nothing. The workload runs
twice, but input can be read once: it goes to the capture pass, whose run is the one
recorded (the tracker pass reads an empty input, as before).

The CLI listens on a Unix socket (in the capture's short socket folder: AF_UNIX paths are
limited to 107 bytes) and, once the capture pass's shim connects, copies its own standard
input into the connection until the end of it; the shim makes the connection the workload's
descriptor 0. Nothing is read from the CLI's input before the pass connects, so no byte is
lost when there is no capture pass (a tracker pass that fails). Input that is ``/dev/null``
or closed is not forwarded. With ``--repeat N`` the first capture pass gets it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
from pathlib import Path

from .._shim import STDIN_ENV

#: Seconds between two looks at ``stop`` while waiting for the pass to connect.
POLL_S = 0.2


def forwardable(fd: int = 0) -> bool:
    """Whether descriptor ``fd`` holds input worth forwarding: open, and not ``/dev/null``."""
    try:
        mode = os.fstat(fd)
        null = os.stat(os.devnull)
    except OSError:
        return False
    return not (stat.S_ISCHR(mode.st_mode) and mode.st_rdev == null.st_rdev)


class Forwarder:
    """Serves the CLI's input to the first pass that connects, from :meth:`start` to
    :meth:`close`. A context manager; its environment for the passes is :attr:`env`."""

    def __init__(self, path: Path, fd: int = 0) -> None:
        self.path, self.fd = path, fd
        self.env: dict[str, str] = {}
        self._stop = threading.Event()
        self._listener: socket.socket | None = None

    def __enter__(self) -> Forwarder:
        if not forwardable(self.fd):
            return self
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
        except OSError:  # no room for the socket: the workload reads an empty input, as before
            listener.close()
            return self
        listener.listen(1)
        listener.settimeout(POLL_S)
        self._listener = listener
        self.env = {STDIN_ENV: str(self.path)}
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
            with contextlib.suppress(OSError):
                self.path.unlink()

    def _serve(self) -> None:
        listener = self._listener
        connection = None
        while connection is None and not self._stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                connection, _ = listener.accept()
        if connection is None:
            return
        with connection, contextlib.suppress(OSError):  # the workload closed its input, or ended
            while not self._stop.is_set():
                data = os.read(self.fd, 65536)
                if not data:
                    connection.shutdown(socket.SHUT_WR)  # the end of the input, for the workload
                    return
                connection.sendall(data)
