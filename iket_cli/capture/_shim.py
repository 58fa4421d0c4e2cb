"""Start-up shim that run-iket launches in both passes in place of the bare workload.

It is run as a *file* (``python /path/to/_shim.py MODE ...``), never imported as part of
the package, so it works under any interpreter the user picks with ``--python`` and adds
nothing heavy to the workload. It does three things:

* It passes the workload's output through a small forked filter that replaces bytes that
  are not UTF-8. run-iket decodes every line of the workload's output strictly and
  dies with a ``UnicodeDecodeError`` traceback on the first bad byte.
* ``call`` mode imports a script or module *as a module* (its ``__main__`` block does not
  run) and calls one function, so a user's file needs no profiling boilerplate.
* ``call`` mode hands its call to iket's warm standby when one is ready (see
  :mod:`iket_cli.capture.two_pass.warm`): a process of the same interpreter that imported the workload's
  heavy libraries (torch) while the tracker pass ran. The standby forks a worker
  that takes this process's environment, working directory and standard streams, and
  this process relays the worker's exit status (and forwards SIGINT/SIGTERM to it).

Modes::

    _shim.py exec ARGV...            exec ARGV (keeps the pid: no extra process level)
    _shim.py script PYTHON FILE [ARGS...]   hand FILE to the warm standby, else exec PYTHON FILE
    _shim.py call FILE|MODULE FUNC [ARGS...]
    _shim.py serve SOCKET [MODULE...]   the warm standby: import MODULEs, serve one call
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
#: The warm standby's socket (set by the CLI for function targets; see iket_cli/capture/two_pass/warm.py).
WARM_ENV = "IKET_WARM_SOCKET"
#: The CLI's input, served on this socket to the capture pass (iket_cli/capture/two_pass/stdin.py).
STDIN_ENV = "IKET_CLI_STDIN"
#: The user's PYTHONWARNINGS, kept from run-iket (``error`` would stop run-iket's own set-up
#: on a DeprecationWarning of its imports) and given back to the workload here.
WARNINGS = "PYTHONWARNINGS"
WORKLOAD_WARNINGS_ENV = "IKET_WORKLOAD_PYTHONWARNINGS"
#: How the capture pass's configuration file ends (the tracker pass has its own).
CAPTURE_CONFIG = os.path.join("iket", "iket.config.json")
#: The standby's log line once a pass handed its call over (iket_cli/capture/two_pass/warm.py reads it).
SERVING = "iket-warm: serving the pass of pid"


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


def workload_environment() -> None:
    """Give the workload what the CLI kept from run-iket: its PYTHONWARNINGS, and in the
    capture pass the CLI's standard input (connected to the CLI's socket as descriptor 0)."""
    kept = os.environ.pop(WORKLOAD_WARNINGS_ENV, None)
    if kept is not None:
        os.environ[WARNINGS] = kept
    served = os.environ.pop(STDIN_ENV, None)
    if served and os.environ.get("IKET_INJECTION_CONFIG", "").endswith(CAPTURE_CONFIG):
        import socket

        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(served)
        except OSError:
            connection.close()
            return
        os.dup2(connection.fileno(), 0)
        connection.close()


def apply_warnings() -> None:
    """The workload's PYTHONWARNINGS in this interpreter, which started without it (a call
    made in the shim's own process, or in the standby's worker)."""
    options = [o for o in os.environ.get(WARNINGS, "").split(",") if o]
    if options:
        import warnings

        try:  # noqa: SIM105  (contextlib would be one more import in every pass)
            warnings._processoptions(options)  # how Python itself reads -W and PYTHONWARNINGS
        except AttributeError:
            pass


def sanitize_output() -> None:
    """Route fds 1 and 2 of this process (and its children) through the UTF-8 filter."""
    sys.stdout.flush()
    sys.stderr.flush()
    out_fd = _output_fd()
    read_fd, write_fd = os.pipe()
    if os.fork() == 0:
        os.close(write_fd)
        if out_fd != 1:  # run-iket's pipe is not ours to hold: a detached helper of the workload
            null = os.open(os.devnull, os.O_WRONLY)  # keeps this filter alive, and run-iket
            os.dup2(null, 1)  # reads its pipe to the end before the pass can end
            os.dup2(null, 2)
            os.close(null)
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
    apply_warnings()
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


def run_script(spec: str, args: list) -> int:
    """Run a script as ``python FILE ARGS`` would (in the standby's worker: the tracker pass
    exec's the interpreter itself): ``__main__``, ``sys.argv`` and ``sys.path[0]`` as there."""
    import runpy

    path = os.path.abspath(spec)
    sys.argv = [spec, *args]
    sys.path[0] = os.path.dirname(path)
    apply_warnings()
    runpy.run_path(path, run_name="__main__")
    return 0


def hand_over(spec: str, func_name, args: list):
    """Run the call in the warm standby if it is ready; its exit status, or None to run here.

    ``connect`` fails at once unless the standby has finished its imports and listens, so
    a pass never waits for it.
    """
    import socket

    path = os.environ.pop(WARM_ENV, None)
    if not path or not hasattr(socket, "send_fds"):  # Python < 3.9 under --python
        return None
    import json

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        job = {
            "spec": spec,
            "func": func_name,
            "args": args,
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "argv": list(getattr(sys, "orig_argv", sys.argv)),
            "ppid": os.getppid(),  # the worker stands in for this process: same parent
            "shim": os.getpid(),
        }
        sys.stdout.flush()
        sys.stderr.flush()
        socket.send_fds(conn, [json.dumps(job).encode() + b"\n"], [0, 1, 2])
        replies = conn.makefile("rb")
        worker = int(replies.readline().split()[1])
    except (OSError, ValueError, IndexError):
        conn.close()
        return None

    def forward(signum, frame):
        try:  # noqa: SIM105  (contextlib would be one more import in every pass)
            os.kill(worker, signum)
        except ProcessLookupError:
            pass  # it has just ended: its status is on the way

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, forward)
    while True:
        try:
            reply = replies.readline()
            break
        except InterruptedError:
            continue
    words = reply.split()
    if len(words) != 2 or words[0] != b"status":
        print("iket: error: the warm standby's worker ended without a status", file=sys.stderr)
        return 1
    code = int(words[1])
    if code < 0:  # the worker died of a signal: die of the same one
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def serve(path: str, modules: list):
    """The warm standby: import ``modules``, then serve one call in a forked worker.

    Returns the worker's exit status in the worker; the standby itself ends with
    ``os._exit`` once it has relayed the status.
    """
    import json
    import socket
    import warnings

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as error:  # the pass imports it itself, and reports the failure
            print(f"iket-warm: import {name} failed: {error!r}", file=sys.stderr)
        if cuda_initialized():  # a forked worker could not use CUDA, nor load the injection
            print(f"iket-warm: importing {name} initialised CUDA; not serving", file=sys.stderr)
            return 0
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    print(f"iket-warm: ready, {', '.join(modules) or 'nothing'} imported", file=sys.stderr, flush=True)
    conn, _ = listener.accept()
    listener.close()
    os.unlink(path)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 16)
        if not more:
            os._exit(1)
        data += more
    job = json.loads(data)
    if len(fds) != 3:
        os._exit(1)
    print(f"{SERVING} {job['shim']}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with library threads
        worker = os.fork()
    if worker == 0:
        conn.close()
        return _work(job, fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"pid {worker}\n".encode())
    _, status = os.waitpid(worker, 0)
    conn.sendall(f"status {os.waitstatus_to_exitcode(status)}\n".encode())
    os._exit(0)


def cuda_initialized() -> bool:
    """Whether this process has called ``cuInit`` (asked without calling it).

    ``cuDeviceGetCount`` answers CUDA_ERROR_NOT_INITIALIZED (3) until ``cuInit``. The
    injection library is loaded by ``cuInit`` from ``CUDA_INJECTION64_PATH``, and CUDA is
    unusable in a child forked after it, so the standby serves only while this is False.
    """
    import ctypes

    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False  # no driver here: nothing to initialise
    count = ctypes.c_int()
    return driver.cuDeviceGetCount(ctypes.byref(count)) != 3


def _work(job: dict, fds: list) -> int:
    """In the forked worker: become the pass's process, then make the call."""
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    for target in range(3):  # no zip(strict=): this file runs under any Python 3 (--python)
        os.dup2(fds[target], target)
        os.close(fds[target])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    hook = sys.modules.get("sitecustomize")
    if os.environ.get("IKET_CLI_PROCS") and hasattr(hook, "record_start"):
        hook.record_start(argv=job["argv"], ppid=job["ppid"])  # label the worker as the pass
    if job["func"] is None:
        return run_script(job["spec"], job["args"])
    return call(job["spec"], job["func"], job["args"])


def main(argv: list) -> int:
    if len(argv) >= 2 and argv[0] == "serve":
        return serve(argv[1], argv[2:])
    if len(argv) < 2 or argv[0] not in ("exec", "call", "script"):
        usage = "exec ARGV... | script PYTHON FILE [ARGS...] | call TARGET FUNC [ARGS...]"
        print(f"usage: _shim.py {usage}", file=sys.stderr)
        return BAD_TARGET
    workload_environment()
    sanitize_output()
    if argv[0] == "script" and len(argv) >= 3:
        handed = hand_over(argv[2], None, argv[3:])
        if handed is not None:
            return handed
        argv = ["exec", *argv[1:]]
    if argv[0] == "exec":
        try:
            os.execvp(argv[1], argv[1:])
        except OSError as error:
            print(f"iket: error: cannot run {argv[1]!r}: {error.strerror}", file=sys.stderr)
            return 127
    if len(argv) < 3:
        print("usage: _shim.py call TARGET FUNC [ARGS...]", file=sys.stderr)
        return BAD_TARGET
    handed = hand_over(argv[1], argv[2], argv[3:])
    if handed is not None:
        return handed
    return call(argv[1], argv[2], argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
