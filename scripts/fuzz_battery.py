"""A battery of mutated captures through the real CLI, each case in a child process under
``RLIMIT_AS`` (issue 31): manifests, traces, Perfetto traces and raw captures, damaged one
value or a few bytes at a time, fed to show, report, lint, diff, merge, export, sql and
postprocess; and (issue 50) the saved calls of ``--extract`` (``calls.json``, the pickles and
raw arrays, planted links and FIFOs) fed to ``profile --replay``, a manifest's ``extract``
record, CuTe DSL's DAG and warp-role files fed to ``show --pipeline``/``--by role`` and the
other readers, and ``doctor --gpu``'s cache; and (issue 63, ``scripts/fuzz_windows.py``) window
captures, the session's own traces, pytest marks and baselines, and ``%iket`` lines.

A case passes when its command ends with exit 0, 1 or 2, prints no traceback, says one
``iket: error:`` line when it fails, ends within ``LIMIT_S`` and stays under ``PEAK_BYTES``
of resident memory; and, where a trace of its capture still shows a loss by itself (recounted
apart from iket), when it does not read that capture as complete (``lost-as-complete``). A
child is forked from this process with iket, numpy, pyarrow and DuckDB already imported (a
case costs its command, not a Python start-up); a decoder that aborts, a runaway allocation
(``MemoryError`` under the address-space limit) or a hang is the child's end, never this
process's.

    python scripts/fuzz_battery.py --cases 1040 --json docs/fuzz_battery.json

``tests/faults/test_fuzz.py`` runs a bounded number of the same cases in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_windows  # noqa: E402  (beside this script)

FIXTURES = ROOT / "tests" / "fixtures"
DOUBLE = ROOT / "tests" / "fakes" / "run_iket_double.py"
PEAK_BYTES = 2 << 30  # no process above 2 GB
HEADROOM = 3 << 30  # address space a child may add to what the parent has mapped
LIMIT_S = 60

#: The kinds of input damaged, and the commands each is fed to ({cap}: the damaged capture,
#: {other}: an intact one, {out}: a fresh output path).
COMMANDS = {
    "manifest": [
        ["show", "{cap}"],
        ["report", "{cap}", "-o", "{out}.html"],
        ["lint", "{cap}", "--format", "json"],
        ["diff", "{other}", "{cap}"],
        ["merge", "{out}", "{cap}", "{other}", "--copy"],
        ["export", "{cap}", "-o", "{out}"],
        ["sql", "{cap}", "SELECT count(*) FROM ranges"],
    ],
    "trace": [
        ["show", "{cap}", "--format", "json"],
        ["show", "{cap}", "--timeline"],
        ["report", "{cap}", "-o", "{out}.html"],
        ["lint", "{cap}"],
        ["diff", "{other}", "{cap}", "--html", "{out}.html"],
        ["merge", "{out}", "{cap}", "{other}", "--copy"],
        ["export", "{cap}", "-o", "{out}", "--format", "csv"],
        ["sql", "{cap}", "SELECT name, count(*) FROM markers GROUP BY name"],
    ],
    "pftrace": [
        ["merge", "{out}", "{cap}", "{other}", "--timeline"],
        ["merge", "{out}", "{cap}", "{other}", "--copy"],
        ["report", "{cap}", "-o", "{out}.html"],
    ],
    "raw": [
        ["postprocess", "{cap}", "--format", "json"],
        ["postprocess", "{cap}", "--format", "all"],
    ],
    "saved": [
        ["profile", "--run-iket", "{double}", "--replay", "{cap}", "-o", "{out}", "--trust-replay"],
        ["profile", "--run-iket", "{double}", "--replay", "{cap}", "-o", "{out}"],
        ["show", "{cap}"],
        ["report", "{cap}", "-o", "{out}.html"],
    ],
    "record": [
        ["show", "{cap}"],
        ["report", "{cap}", "-o", "{out}.html"],
        ["lint", "{cap}"],
        ["diff", "{other}", "{cap}"],
    ],
    "dag": [
        ["show", "{cap}", "--pipeline"],
        ["show", "{cap}", "--by", "role"],
        ["report", "{cap}", "-o", "{out}.html"],
        ["lint", "{cap}"],
        ["diff", "{cap}", "{other}"],
        ["export", "{cap}", "-o", "{out}"],
        ["sql", "{cap}", "SELECT count(*) FROM ranges"],
    ],
    "roles": [
        ["show", "{cap}", "--by", "role"],
        ["show", "{cap}", "--pipeline"],
        ["report", "{cap}", "-o", "{out}.html"],
        ["show", "{other}", "--by", "role", "--roles", "{cap}/kernel_symbols.json"],
    ],
    "doctor": [
        ["doctor", "--gpu"],
        ["doctor", "--gpu", "--json"],
    ],
    "loss": [  # issue 51: a capture that lost data, its completeness record or raw files damaged
        ["show", "{cap}"],
        ["lint", "{cap}", "--format", "json"],
        ["report", "{cap}", "-o", "{out}.html"],
        ["diff", "{other}", "{cap}", "--fail-over", "5%"],
        ["postprocess", "{cap}", "--format", "json"],
    ],
}
COMMANDS.update(fuzz_windows.COMMANDS)
#: The seed captures each kind damages (the first kinds' choice is as it was: same cases).
SEEDS_OF = {
    "manifest": ("affine", "multi"),
    "trace": ("affine", "multi"),
    "pftrace": ("affine", "multi"),
    "raw": ("affine", "multi"),
    "saved": ("saved",),
    "record": ("saved",),
    "dag": ("pipe",),
    "roles": ("pipe",),
    "doctor": ("affine",),
    "loss": ("loss",),
    **fuzz_windows.SEEDS_OF,
}
#: The ``--extract`` seed: a numpy workload whose one call is recorded.
KERNELS = "def launch(a, b):\n    b[:] = a * 2\n    return b\n"
MODEL = "import numpy as np, kernels\nkernels.launch(np.arange(8.0), np.zeros(8))\n"


@dataclass
class Outcome:
    kind: str
    seed: int
    command: list[str]
    code: int | None  # None: killed by a signal
    signal: int | None
    peak: int  # bytes
    seconds: float
    problem: str | None  # None: the case passed

    def as_dict(self) -> dict:
        return {**self.__dict__, "command": " ".join(self.command)}


def prepare(work: Path) -> dict[str, Path]:
    """Two real captures made by ``iket profile`` (the run-iket double replays the affine and
    multi H200 captures): the seeds every case copies and damages."""
    import runpy

    launcher = runpy.run_path(str(DOUBLE))["write_launcher"](work / "double")
    (work / "w.py").write_text("def workload():\n    pass\n")
    (work / "kernels.py").write_text(KERNELS)
    (work / "model.py").write_text(MODEL)
    seeds = {}
    for name, replay, target in (
        ("affine", "affine", ["w.py:workload"]),
        ("multi", "multi", ["w.py:workload"]),
        ("saved", "affine", ["model.py", "--extract", "kernels:launch"]),
        ("loss", "loss_multi", ["--max-ts-cnt-per-warp", "3", "w.py:workload"]),
    ):
        env = {**os.environ, "IKET_DOUBLE_CAPTURE": str(FIXTURES / replay), "PYTHONPATH": str(ROOT)}
        env.pop("CUDA_INJECTION64_PATH", None)
        argv = [sys.executable, "-m", "iket_cli", "profile", "--run-iket", str(launcher)]
        argv += ["--postprocess", "all", "--keep", "-o", name, *target]
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"the seed capture {name} failed: {done.stderr[-2000:]}")
        seeds[name] = work / name
    shutil.copytree(FIXTURES / "cute_pipeline", work / "pipe")
    seeds["pipe"] = work / "pipe"
    seeds["double"] = launcher
    fuzz_windows.prepare(work, seeds)
    return seeds


def fake_gpu(work: Path) -> dict[str, str]:
    """What the battery's children see: an ``nvidia-smi`` that answers as an H200's (so that
    ``doctor --gpu`` reads its cache), iket's cache here, and the double's capture."""
    folder = work / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, NVIDIA H200, 580.159.04'\n")
    smi.chmod(0o755)
    return {
        "PATH": f"{folder}:{os.environ.get('PATH', '')}",
        "IKET_CACHE_DIR": str(work / "cache"),
        "IKET_DOUBLE_CAPTURE": str(FIXTURES / "affine"),
    }


def probe_cache(env: dict[str, str]) -> Path:
    """Where ``doctor --gpu`` looks for this stack's table, with a table written there."""
    from iket_cli.capture import probes
    from iket_cli.system import machine, toolchain

    tool = toolchain.find(None, env)
    of = probes.stack(tool.version, machine.query_gpus())
    path = probes.cache_file(env, of)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():  # what the last case left there (a FIFO, a link...)
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    probe = {"name": "fp32 GEMM", "verdict": "survives", "detail": "ran to its end", "seconds": 1.0}
    path.write_text(json.dumps({"stack": of, "probed_at": "2026-12-06T00:00:00+00:00", "probes": [probe]}))
    return path


# -- damage --------------------------------------------------------------------------------
def places(node, prefix=()):
    """Every place in a JSON document: the keys and indices that lead to it (a few of each
    list: the shapes repeat)."""
    yield prefix
    if isinstance(node, dict):
        for key, child in node.items():
            yield from places(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node[:3]):
            yield from places(child, (*prefix, index))


def _value(rng: random.Random):
    return rng.choice(
        [
            None,
            True,
            -1,
            0,
            2**31,
            2**63,
            -(2**63) - 1,
            2**80,
            1e308,
            1.5,
            "",
            "x" * 300,
            "\udcff",
            "<!--<script",
            "\x1b]0;t\x07",
            "[/bad]",
            ":x:",
            "../../../etc/passwd",
            "/",
            [],
            {},
            [1, 2],
            {"a": None},
        ]
    )


def damage_json(text: str, rng: random.Random, compact: bool | None = None, under: tuple = ()) -> str:
    """One value of a JSON document replaced, removed, or nested 100,000 deep; written in
    the decoder's compact layout or pretty-printed. ``under``: only inside that place."""
    document = json.loads(text)
    spots = [p for p in places(document) if p and p[: len(under)] == under]
    if not spots or rng.random() < 0.03:
        return "[" * 100_000 + "]" * 100_000
    where = rng.choice(spots)
    parent = document
    for step in where[:-1]:
        parent = parent[step]
    if rng.random() < 0.75:
        parent[where[-1]] = _value(rng)
    elif isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent.pop(where[-1])
    compact = rng.random() < 0.5 if compact is None else compact
    if compact:
        return json.dumps(document, separators=(",", ":"))
    return json.dumps(document, indent=1)


def damage_bytes(data: bytes, rng: random.Random) -> bytes:
    """A few bytes flipped, the file cut short, bytes inserted, or a stretch repeated."""
    choice = rng.randrange(4)
    if not data or choice == 0:
        return data[: rng.randrange(len(data) + 1)]
    buffer = bytearray(data)
    if choice == 1:
        for _ in range(rng.randint(1, 8)):
            buffer[rng.randrange(len(buffer))] = rng.randrange(256)
        return bytes(buffer)
    at = rng.randrange(len(buffer))
    if choice == 2:
        return bytes(buffer[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + buffer[at:])
    return bytes(buffer[:at] + buffer[at : at + 4096] * rng.randint(2, 50) + buffer[at:])


def make_case(kind: str, seed: int, seeds: dict[str, Path], into: Path, which: int = 0) -> list[str]:
    """Copy a seed capture into ``into``/cap, damage it as ``kind`` says, and return the
    command ``COMMANDS[kind][which]`` (modulo their number) with its paths filled in."""
    rng = random.Random(seed)
    if kind in fuzz_windows.COMMANDS:
        return fuzz_windows.make(kind, rng, seeds, into, which, damage_json)[0]
    source = seeds[rng.choice(SEEDS_OF[kind])]
    cap = into / "cap"
    shutil.copytree(source, cap, symlinks=True)
    if kind in ANNOTATED:
        ANNOTATED[kind](cap, rng, seeds)
    elif kind == "manifest":
        target = cap / "manifest.json"
        target.write_text(damage_json(target.read_text(), rng))
    elif kind == "trace":
        target = next(cap.glob("*.trace.json"))
        target.write_text(damage_json(target.read_text(), rng))
    elif kind == "pftrace":
        target = next(cap.glob("*.pftrace"))
        target.write_bytes(damage_bytes(target.read_bytes(), rng))
    else:  # raw: the decoder's input, damaged; the artifacts removed so that it runs
        raw = next((cap / "iket").glob("pid_*"))
        if rng.random() < 0.6:
            target = raw / "iket.data.json"
            target.write_text(damage_json(target.read_text(), rng, compact=False))
        else:
            target = raw / "iket.data.bin"
            target.write_bytes(damage_bytes(target.read_bytes(), rng))
    other = (
        seeds["pipe"] if source.name == "pipe" else seeds["affine" if source.name != "affine" else "multi"]
    )
    words = COMMANDS[kind][which % len(COMMANDS[kind])]
    return [w.format(cap=cap, other=other, out=into / "out", double=seeds["double"]) for w in words]


def _special(path: Path, rng: random.Random) -> None:
    """``path`` replaced by a FIFO, a link to ``/dev/zero``, a link out of the capture, or a folder."""
    path.unlink()
    choice = rng.randrange(4)
    if choice == 0:
        os.mkfifo(path)
    elif choice == 1:
        path.symlink_to("/dev/zero")
    elif choice == 2:
        path.symlink_to("/etc/hostname")
    else:
        path.mkdir()


def _damage_file(path: Path, rng: random.Random) -> None:
    if rng.random() < 0.15:
        _special(path, rng)
    elif path.suffix == ".json":
        path.write_text(damage_json(path.read_text(), rng))
    else:
        path.write_bytes(damage_bytes(path.read_bytes(), rng))


def _saved(cap: Path, rng: random.Random, seeds: dict[str, Path]) -> None:
    """The saved calls: their index, a pickle or a raw array damaged, or one replaced."""
    files = sorted(p for p in (cap / "extract").rglob("*") if p.is_file())
    index = cap / "extract" / "calls.json"
    _damage_file(index if rng.random() < 0.5 else rng.choice(files), rng)


def _record(cap: Path, rng: random.Random, seeds: dict[str, Path]) -> None:
    """The manifest's ``extract`` record, one value of it damaged."""
    target = cap / "manifest.json"
    target.write_text(damage_json(target.read_text(), rng, under=("extract",)))


def _dag(cap: Path, rng: random.Random, seeds: dict[str, Path]) -> None:
    target = next(cap.glob("*.iket_dag.json"))
    if rng.random() < 0.1:  # one edge many times over
        dag = json.loads(target.read_text())
        dag["edges"] = dag["edges"] * rng.choice([2_000, 20_000])
        target.write_text(json.dumps(dag))
    else:
        _damage_file(target, rng)


def _roles(cap: Path, rng: random.Random, seeds: dict[str, Path]) -> None:
    target = cap / "kernel_symbols.json"
    if rng.random() < 0.2:  # a role's warps out of any CTA
        roles = json.loads(target.read_text())
        roles["warps"]["Consumer"]["warp_end"] = rng.choice([2**62, 10**9, 33, -1])
        target.write_text(json.dumps(roles))
    else:
        _damage_file(target, rng)


def _doctor(cap: Path, rng: random.Random, seeds: dict[str, Path]) -> None:
    """``doctor --gpu``'s cached table for this stack, damaged (the stack's key kept)."""
    _damage_file(probe_cache(dict(os.environ)), rng)


#: The kinds of issue 50, each a function that damages its input in a fresh copy.
def _loss(cap: Path, rng: random.Random, seeds: dict[str, Path]) -> None:
    """The completeness record, the raw capture's launch list or data, or the injection log
    damaged; a raw folder (no manifest, no artifacts) half the time, for postprocess to judge."""
    raw = next((cap / "iket").glob("pid_*"))
    choice = rng.randrange(4)
    if choice == 0:
        target = cap / "manifest.json"
        target.write_text(damage_json(target.read_text(), rng, under=("completeness",)))
    else:
        _damage_file(
            rng.choice([raw / "iket.data.json", raw / "iket.data.bin", raw / "iket.injection.log"]), rng
        )
    if choice and rng.random() < 0.5:
        for path in [cap / "manifest.json", *cap.glob("iket_pid_*")]:
            path.unlink()


ANNOTATED = {
    "saved": _saved,
    "record": _record,
    "dag": _dag,
    "roles": _roles,
    "doctor": _doctor,
    "loss": _loss,
}


# -- one case, in a child --------------------------------------------------------------------
def run_case(argv: list[str], into: Path) -> tuple[int | None, int | None, int, float, str, str]:
    """(exit code or None, signal or None, peak RSS in bytes, seconds, stdout, stderr) of
    ``iket ARGV`` run by a forked child of this process."""
    out_path, err_path = into / "stdout", into / "stderr"
    limit = _mapped() + HEADROOM
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            os.chdir(into)
            for fd, path in ((1, out_path), (2, err_path)):
                handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(handle, fd)
                os.close(handle)
            # the streams anew on those files (under pytest, sys.stdout is its own buffer)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            signal.alarm(LIMIT_S)
            from iket_cli.cli import main

            main(argv)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 70
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:
                pass
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - start
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    read = lambda path: path.read_text(errors="replace") if path.exists() else ""  # noqa: E731
    return code, signum, usage.ru_maxrss * 1024, seconds, read(out_path), read(err_path)


def _mapped() -> int:
    """This process's mapped address space (VmSize), which a forked child starts with."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def judge(code, signum, peak, stdout, stderr) -> str | None:
    """What is wrong with a case's end, or None."""
    if signum is not None:
        return f"killed by signal {signum}" + (" (the time limit)" if signum == signal.SIGALRM else "")
    if "Traceback" in stdout or "Traceback" in stderr:
        return "a traceback"
    if code not in (0, 1, 2):
        return f"exit {code}"
    if code and sum(line.startswith("iket: error:") for line in stderr.splitlines()) != 1:
        return "not one 'iket: error:' line"
    if peak > PEAK_BYTES:
        return f"{peak / 2**30:.1f} GB resident"
    return None


def battery(cases: int, work: Path, first_seed: int = 0, kinds=tuple(COMMANDS)) -> list[Outcome]:
    """``cases`` cases, the kinds in turn, each in its own folder under ``work``."""
    _preload()
    saved_env = dict(os.environ)
    os.environ.update(fake_gpu(work))  # the children's, and the seeds'
    try:
        return _battery(cases, work, first_seed, kinds)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


def _battery(cases: int, work: Path, first_seed: int, kinds) -> list[Outcome]:
    seeds = prepare(work)
    outcomes = []
    for number in range(cases):
        kind = kinds[number % len(kinds)]
        seed = first_seed + number
        into = work / f"case{number}"
        into.mkdir()
        argv = make_case(kind, seed, seeds, into, which=number // len(kinds))
        lossy = fuzz_windows.shows_a_loss(into / "cap")  # before the command: it may rewrite the trace
        if argv[0] == "@pytest":
            started = time.monotonic()
            code, signum, out, err = fuzz_windows.run_pytest(argv[1], into, seeds["library"])
            peak, seconds = 0, time.monotonic() - started
            problem = fuzz_windows.judge_host(kind, code, signum, out, err)
        elif argv[0] == "@ipython":
            started = time.monotonic()
            code, signum, out, err = fuzz_windows.run_magic(argv[1], into, seeds["library"])
            peak, seconds = 0, time.monotonic() - started
            problem = fuzz_windows.judge_host(kind, code, signum, out, err)
        else:
            code, signum, peak, seconds, out, err = run_case(argv, into)
            problem = judge(code, signum, peak, out, err)
            if (
                problem is None
                and lossy
                and fuzz_windows.lost_as_complete(argv, code, out, err, into / "cap")
            ):
                problem = "lost-as-complete"
        outcomes.append(Outcome(kind, seed, argv, code, signum, peak, round(seconds, 3), problem))
        if problem is None:
            shutil.rmtree(into, ignore_errors=True)
        else:
            (into / "problem.txt").write_text(f"{problem}\n{' '.join(argv)}\n{err[-4000:]}")
    return outcomes


def _preload() -> None:
    """What every command needs, imported once before the children are forked."""
    import numpy  # noqa: F401

    import iket_cli.cli  # noqa: F401

    for optional in ("pyarrow", "pyarrow.parquet", "duckdb"):
        with contextlib.suppress(ImportError):
            __import__(optional)


def summary(outcomes: list[Outcome]) -> str:
    codes = Counter(str(o.code if o.signal is None else f"signal {o.signal}") for o in outcomes)
    by_kind = Counter(o.kind for o in outcomes)
    commands = Counter(o.command[0] for o in outcomes)
    bad = [o for o in outcomes if o.problem]
    peak = max((o.peak for o in outcomes), default=0)
    lines = [
        f"{len(outcomes)} cases ({', '.join(f'{k} {n}' for k, n in by_kind.items())}); "
        f"commands: {', '.join(f'{k} {n}' for k, n in sorted(commands.items()))}",
        f"exit codes: {', '.join(f'{k}: {n}' for k, n in sorted(codes.items()))}",
        f"largest resident memory of a case: {peak / 2**20:.0f} MB; "
        f"slowest case: {max((o.seconds for o in outcomes), default=0):.1f} s",
        f"problems: {len(bad)}",
        *(f"  {o.kind} seed {o.seed}: {o.problem}: iket {' '.join(o.command)}" for o in bad[:20]),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=560)
    parser.add_argument("--seed", type=int, default=0, help="the first case's seed")
    parser.add_argument(
        "--keep", type=Path, help="work here (the failing cases stay) instead of a temporary folder"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="iket-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    outcomes = battery(args.cases, work, args.seed)
    print(summary(outcomes))
    print(f"wall time: {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([o.as_dict() for o in outcomes], indent=1))
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if any(o.problem for o in outcomes) else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
