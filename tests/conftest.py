"""Shared helpers: run the real CLI in a subprocess, and the run-iket test double."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from iket_cli.model import pftrace as pftrace_mod
from iket_cli.model.annotations import Dag, Edge

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DOUBLE = Path(__file__).resolve().parent / "fakes" / "run_iket_double.py"
#: The two-stage pipeline of the flow and stage tests: a producer ``load``, a consumer ``math``.
LOAD_MATH = [Dag("pipe", [Edge("load", "math")])]


@dataclass
class Result:
    """A finished ``iket`` run; ``str()`` shows everything, for assertion messages."""

    code: int
    stdout: str
    stderr: str
    args: list

    def __str__(self) -> str:
        command = " ".join(map(str, self.args))
        return f"$ {command}\nexit {self.code}\n--- stdout\n{self.stdout}--- stderr\n{self.stderr}"


def run_iket(*args, cwd: Path, env: dict | None = None, timeout: float = 120) -> Result:
    """Run ``python -m iket_cli ARGS`` as a user would, with a clean, non-interactive stdin."""
    # The caller's Nsight injection or CuTe DSL cache setting must not change what a test sees.
    full_env = {
        k: v for k, v in os.environ.items() if k not in ("CUDA_INJECTION64_PATH", "CUTE_DSL_NO_CACHE")
    }
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "iket_cli", *map(str, args)]
    proc = subprocess.run(
        cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    return Result(proc.returncode, proc.stdout, proc.stderr, cmd)


def start_iket(*args, cwd: Path, **popen) -> subprocess.Popen:
    """Start ``python -m iket_cli ARGS`` in the background (for signal and lock tests)."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    cmd = [sys.executable, "-m", "iket_cli", *map(str, args)]
    return subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, text=True, **popen)


@pytest.fixture(scope="session")
def library(tmp_path_factory) -> Path:
    """The session C ABI's stand-in (tests/fakes/session_double.c), built with the system's
    C compiler: ctypes loads it as it loads NVIDIA's library, which needs a GPU driver."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the session's stand-in")
    out = tmp_path_factory.mktemp("double") / "libiket_double.so"
    source = Path(__file__).resolve().parent / "fakes" / "session_double.c"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(out), str(source)], check=True)
    return out


def session_env(library: Path, trace: str = "plain", **more: str) -> dict[str, str]:
    """The environment that makes iket load the stand-in, saving ``fixtures/session/<trace>``
    (windows after the first of a process open, as run-iket 4.8.1's do; a machine where a later
    window dies, ``IKET_CLI_SESSION_WINDOWS=1``, is tested apart)."""
    return {
        "IKET_CLI_SESSION_LIBRARY": str(library),
        "IKET_DOUBLE_TRACE": str(FIXTURES / "session" / f"{trace}.trace.json"),
        **more,
    }


@pytest.fixture(scope="session", autouse=True)
def private_tracker_cache(tmp_path_factory):
    """Captures made by the tests cache their tracker passes here, not in ~/.cache: a test
    never reuses another run's, and the user's cache is left alone."""
    os.environ["IKET_CACHE_DIR"] = str(tmp_path_factory.mktemp("iket-cache"))
    yield
    os.environ.pop("IKET_CACHE_DIR", None)


@pytest.fixture(scope="session")
def double(tmp_path_factory) -> Path:
    """An executable run-iket test double (real run-iket, GPU output replayed)."""
    return runpy.run_path(str(DOUBLE))["write_launcher"](tmp_path_factory.mktemp("double"))


@pytest.fixture(scope="session")
def real_run_iket() -> Path:
    """The real run-iket installed beside this Python (libs-base only, no .pth)."""
    path = Path(sys.executable).parent / "run-iket"
    if not path.exists():
        found = shutil.which("run-iket")
        assert found, "the project's install must provide run-iket"
        path = Path(found)
    return path


def replay(name: str) -> dict:
    """Environment that makes the double replay ``tests/fixtures/<name>``."""
    return {"IKET_DOUBLE_CAPTURE": str(FIXTURES / name)}


def profile_double(double: Path, cwd: Path, *args, env: dict | None = None, timeout: float = 120) -> Result:
    """``iket profile --run-iket DOUBLE ARGS`` in ``cwd``, the affine capture replayed after
    each pass (``env`` adds to or overrides that)."""
    return run_iket(
        "profile",
        "--run-iket",
        double,
        *args,
        cwd=cwd,
        env={**replay("affine"), **(env or {})},
        timeout=timeout,
    )


def with_path(folder: Path) -> dict:
    """``PYTHONPATH`` with ``folder`` first (a test's ``sitecustomize``), the caller's after it."""
    rest = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(folder) + (os.pathsep + rest if rest else "")}


def kept(tmp_path: Path, name: str) -> Path:
    """A copy of the kept capture ``tests/fixtures/<name>`` with its final artifacts removed:
    only the raw data is left, as ``--keep`` leaves it before decoding."""
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    for path in folder.glob("iket_pid_*"):
        path.unlink()
    return folder


def minimal_manifest(**over) -> dict:
    """The smallest manifest of schema version 1 (``over`` replaces or adds keys)."""
    record = {
        "schema_version": 1,
        "status": "ok",
        "error": None,
        "target": {"kind": "script", "spec": "/a.py", "args": []},
        "argv": ["python", "/a.py"],
        "run_iket_argv": ["run-iket"],
        "cwd": "/",
        "started_at": "2026-12-02T00:00:00+00:00",
        "finished_at": "2026-12-02T00:00:01+00:00",
        "duration_s": 1.0,
        "phases": {},
        "postprocess": ["json"],
        "keep": False,
        "log": "iket.log",
        "versions": {"iket_cli": "0.1.0", "run_iket": "4.8.1", "python": "3.12", "gpus": []},
        "processes": [],
    }
    record.update(over)
    return record


def manifest_text(**over) -> str:
    """:func:`minimal_manifest` as the text of a ``manifest.json``."""
    import json

    return json.dumps(minimal_manifest(**over))


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes: for 'byte-for-byte intact' checks."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def all_gone(pids, within: float = 5.0) -> bool:
    """Whether every process in ``pids`` is dead (or a zombie) within ``within`` seconds.

    SIGKILL takes effect asynchronously: on a loaded machine a killed process can take a
    moment to die. One that is still running after the wait was not killed.
    """
    import time

    deadline = time.monotonic() + within
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def launch_header(kernel: str, grid_id: int, block_x: int = 32) -> dict:
    """A launch record's fields besides its markers, ranges and warp lifetimes."""
    return {
        "blockDimX": block_x,
        "blockDimY": 1,
        "blockDimZ": 1,
        "contextId": 1,
        "enabledCluster": {"x": 1, "y": 1, "z": 1},
        "gridDimX": 1,
        "gridDimY": 1,
        "gridDimZ": 1,
        "gridId": grid_id,
        "kernelName": kernel,
        "singleClusterActive": 0,
    }


def write_trace(path: Path, strings: list[str], launches: list[dict], locations: int = 1) -> None:
    """A trace in the decoder's compact layout (sorted keys, no spaces).

    Each launch spec has ``kernel`` and lists ``ranges`` (name index, loc, start, end),
    ``markers`` (name index, loc, timestamp) and ``warps`` (loc, start, end).
    """
    import json

    docs = []
    for number, spec in enumerate(launches):
        docs.append(
            {
                **launch_header(spec["kernel"], number + 1, block_x=32 * locations),
                "markers": [
                    {"color": 0, "locIdx": loc, "markerNameIdx": name, "timestamp": ts}
                    for name, loc, ts in spec.get("markers", [])
                ],
                "ranges": [
                    {
                        "endTs": end,
                        "internalEvents": [],
                        "rangeColor": 0,
                        "rangeId": 1,
                        "rangeNameIdx": name,
                        "rangeScope": 0,
                        "rangeType": 2,
                        "startTs": start,
                        "warpLocIdxs": [loc, loc],
                    }
                    for name, loc, start, end in spec.get("ranges", [])
                ],
                "warpLifetimes": [
                    {"endTs": end, "locIdx": loc, "startTs": start}
                    for loc, start, end in spec.get("warps", [])
                ],
            }
        )
    table = [{"ctaId": [0, 0, 0], "gpcId": 0, "smId": 0, "tpcId": 0, "warpId": w} for w in range(locations)]
    doc = {
        "graphLaunches": {},
        "launches": docs,
        "locationTable": table,
        "meta": {"version": 1},
        "stringTable": strings,
    }
    path.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")))


# -- reading Perfetto traces back (pftrace tests, merge --timeline tests) ---------------


def packets(data: bytes) -> list[dict[int, list]]:
    """Each TracePacket of a trace as {field number: [values]}."""
    result = []
    for number, _, packet in pftrace_mod.fields(data):
        assert number == pftrace_mod.TRACE_PACKET
        fields: dict[int, list] = {}
        for field, _, value in pftrace_mod.fields(packet):
            fields.setdefault(field, []).append(value)
        result.append(fields)
    return result


def tracks(data: bytes) -> list[dict[int, list]]:
    """Each TrackDescriptor of a trace as {field number: [values]}."""
    out = []
    for packet in packets(data):
        for body in packet.get(pftrace_mod.PACKET_TRACK_DESCRIPTOR, []):
            fields: dict[int, list] = {}
            for field, _, value in pftrace_mod.fields(body):
                fields.setdefault(field, []).append(value)
            out.append(fields)
    return out


def perfetto_view(data: bytes) -> tuple[Counter, Counter]:
    """What a Perfetto trace shows, read through Perfetto's own protobuf schema (independent
    of iket's wire walker): its tracks as (path of names, sibling rank, child ordering), and
    its slices and instants as (track path, name, timestamp, duration, args), durations from
    each track's begins and ends in timestamp order (stable, as the trace processor sorts).
    Two traces that give the same view are the same trace (uuids, order and bytes aside)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    trace = Trace.FromString(data)
    names: dict[int, tuple[str, int | None]] = {}
    shown = Counter()
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            names[d.uuid] = (d.name, d.parent_uuid if d.HasField("parent_uuid") else None)
    paths: dict[int, tuple[str, ...]] = {}

    def path(uuid: int) -> tuple[str, ...]:
        if uuid not in paths:
            name, parent = names.get(uuid, (f"?{uuid}", None))
            paths[uuid] = (*(path(parent) if parent is not None else ()), name)
        return paths[uuid]

    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            shown[(path(d.uuid), d.sibling_order_rank, d.child_ordering)] += 1
    events: dict[int, list] = {}
    for packet in trace.packet:
        if packet.HasField("track_event"):
            e = packet.track_event
            args = tuple(a.SerializeToString() for a in e.debug_annotations)
            events.setdefault(e.track_uuid, []).append((packet.timestamp, e.type, e.name, args))
    slices = Counter()
    for uuid, found in events.items():
        found.sort(key=lambda event: event[0])
        open_: list = []
        for ts, kind, name, args in found:
            if kind == 1:  # TYPE_SLICE_BEGIN
                open_.append((ts, name, args))
            elif kind == 2 and open_:  # TYPE_SLICE_END
                begin, began_as, began_args = open_.pop()
                slices[(path(uuid), began_as, begin, ts - begin, began_args, name)] += 1
            else:
                slices[(path(uuid), name, ts, kind, args)] += 1
        slices[(path(uuid), "unclosed", len(open_))] += 1
    return shown, slices


@pytest.fixture(scope="session")
def torch_warp(tmp_path_factory) -> Path:
    """``iket profile --warp-trace -- python3 examples/torch_kernels.py`` on the H200, its raw
    capture (``tests/fixtures/torch_warp.tar.xz``: 27 launches of 7 PyTorch and cuBLAS kernels,
    170k warps) decoded here by the real decoder, through ``iket postprocess``, once a session."""
    import tarfile

    folder = tmp_path_factory.mktemp("torch_warp")
    with tarfile.open(FIXTURES / "torch_warp.tar.xz") as archive:
        archive.extractall(folder, filter="data")
    done = run_iket("postprocess", folder, "--format", "json", cwd=folder, timeout=300)
    assert done.code == 0, done
    return folder


@pytest.fixture(scope="session")
def pipeline_shapes(tmp_path_factory) -> Path:
    """H200 captures of ``examples/cute_pipeline.py`` and ``examples/cute_round_robin.py`` in
    nine shapes and speeds (``scripts/gpu_pipeline.py``'s SHAPES; one folder each, the trace
    JSON, DAG, roles and manifest: ``tests/fixtures/pipeline_shapes.tar.xz``)."""
    import tarfile

    folder = tmp_path_factory.mktemp("pipeline_shapes")
    with tarfile.open(FIXTURES / "pipeline_shapes.tar.xz") as archive:
        archive.extractall(folder, filter="data")
    return folder


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """A Slurm cluster that answers; .ci/run starts a one-node one (scripts/slurm_local.sh)."""
    from iket_cli.system import slurm_cli

    answers, detail = slurm_cli.cluster_answer()
    if not answers:
        pytest.skip(f"no Slurm cluster answers here ({detail}); scripts/slurm_local.sh starts one")


def project_module(folder: str, name: str):
    """A module of the project's ``bench/`` or ``scripts/`` (the tests use their generators
    and batteries, not copies of them)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parent.parent / folder / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def cmdline(pid: int) -> bytes:
    """A process's command line as /proc has it (empty once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""
