"""Start-up shim that run-iket launches in both passes in place of the bare workload.

It is run as a *file* (``python /path/to/_shim.py MODE ...``), never imported as part of
the package, so it works under any interpreter the user picks with ``--python`` and adds
nothing heavy to the workload. It does two things:

* It passes the workload's output through a small forked filter that replaces bytes that
  are not UTF-8. run-iket 4.8.1 decodes every line of the workload's output strictly and
  dies with a ``UnicodeDecodeError`` traceback on the first bad byte.
* ``call`` mode imports a script or module *as a module* (its ``__main__`` block does not
  run) and calls one function, so a user's file needs no profiling boilerplate.

Modes::

    _shim.py exec ARGV...            exec ARGV (keeps the pid: no extra process level)
    _shim.py call FILE|MODULE FUNC [ARGS...]
"""

import codecs
import importlib
import importlib.util
import os
import select
import signal
import sys

#: Exit status when the function target turns out not to exist in the pass itself.
BAD_TARGET = 2
#: A FIFO of the CLI's: the workload's output goes there, live, instead of to run-iket,
#: which reads its children's output to the end before it prints any of it.
STREAM_ENV = "IKET_CLI_STREAM"


def _output_fd() -> int:
    """The CLI's FIFO if it gave one (and it can be opened), else our stdout."""
    path = os.environ.pop(STREAM_ENV, None)
    if path:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            pass
    return 1


def _filter(read_fd: int, out_fd: int) -> None:
    """Copy ``read_fd`` to ``out_fd``, replacing invalid UTF-8; runs in the forked filter."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # drain what the workload wrote last
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while True:
        try:
            chunk = os.read(read_fd, 65536)
        except InterruptedError:
            continue
        text = decoder.decode(chunk, final=not chunk)
        data = text.encode("utf-8")
        while data:
            try:
                written = os.write(out_fd, data)
            except BlockingIOError:  # the CLI reads slower than the workload writes
                select.select([], [out_fd], [])
                continue
            data = data[written:]
        if not chunk:
            return


def sanitize_output() -> None:
    """Route fds 1 and 2 of this process (and its children) through the UTF-8 filter."""
    sys.stdout.flush()
    sys.stderr.flush()
    out_fd = _output_fd()
    read_fd, write_fd = os.pipe()
    if os.fork() == 0:
        os.close(write_fd)
        try:
            _filter(read_fd, out_fd)
        finally:
            os._exit(0)
    os.close(read_fd)
    if out_fd != 1:
        os.close(out_fd)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)


def _import_target(spec: str):
    """Import a script file or a dotted module without running its ``__main__`` block."""
    if spec.endswith(".py") or os.sep in spec:
        path = os.path.abspath(spec)
        name = os.path.splitext(os.path.basename(path))[0]
        sys.path[0] = os.path.dirname(path)
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # so "import <stem>" in the workload finds the same one
        module_spec.loader.exec_module(module)
        return module
    sys.path[0] = os.getcwd()
    return importlib.import_module(spec)


def call(spec: str, func_name: str, args: list) -> int:
    """Import ``spec`` and call ``func_name()`` with ``sys.argv`` set to the target's args."""
    sys.argv = [spec, *args]
    module = _import_target(spec)
    func = getattr(module, func_name, None)
    if func is None:
        print(f"iket: error: {spec} has no attribute {func_name!r}", file=sys.stderr)
        return BAD_TARGET
    if not callable(func):
        print(f"iket: error: {spec}:{func_name} is not callable", file=sys.stderr)
        return BAD_TARGET
    func()
    return 0


def main(argv: list) -> int:
    if len(argv) < 2 or argv[0] not in ("exec", "call"):
        print("usage: _shim.py exec ARGV... | call TARGET FUNC [ARGS...]", file=sys.stderr)
        return BAD_TARGET
    sanitize_output()
    if argv[0] == "exec":
        try:
            os.execvp(argv[1], argv[1:])
        except OSError as error:
            print(f"iket: error: cannot run {argv[1]!r}: {error.strerror}", file=sys.stderr)
            return 127
    if len(argv) < 3:
        print("usage: _shim.py call TARGET FUNC [ARGS...]", file=sys.stderr)
        return BAD_TARGET
    return call(argv[1], argv[2], argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
