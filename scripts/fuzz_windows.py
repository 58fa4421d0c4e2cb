"""The fuzz battery's inputs of the in-process capture (issue 63): window captures and the
session's own traces damaged, completeness records, pytest marks and baselines, and ``%iket``
lines, with the oracle that no loss a trace still shows is read as complete.

``scripts/fuzz_battery.py`` runs these kinds beside its own: ``window`` (a capture made by
``iket_cli.window`` against the session's C stand-in, its ``window`` record, completeness record
or session trace damaged), ``session`` (a folder of the session's indented trace JSON alone,
damaged, for ``iket postprocess``), ``mark`` (an ``@pytest.mark.iket`` of random keys and
values, or a damaged ``--iket-baseline``, run by a real pytest with the plugin) and ``magic``
(a random ``%iket`` / ``%%iket`` line in a real IPython shell).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
STAND_IN = ROOT / "tests" / "fakes" / "session_double.c"
LIMIT_S = 60

COMMANDS = {
    "window": [
        ["show", "{cap}"],
        ["lint", "{cap}", "--format", "json"],
        ["report", "{cap}", "-o", "{out}.html"],
        ["diff", "{other}", "{cap}", "--fail-over", "5%"],
        ["postprocess", "{cap}", "--format", "json"],
        ["show", "{cap}", "--format", "json"],
    ],
    "session": [
        ["postprocess", "{cap}", "--format", "json"],
        ["postprocess", "{cap}", "--format", "all"],
        ["show", "{cap}"],
        ["diff", "{other}", "{cap}", "--fail-over", "5%"],
    ],
    "mark": [["@pytest"]],
    "magic": [["@ipython"]],
}
SEEDS_OF = {
    "window": ("window", "window_lossy"),
    "session": ("session", "session_lossy"),
    "mark": ("window",),
    "magic": ("window",),
}
#: The mark's keys the plugin knows, and some it does not.
MARK_KEYS = [
    "max",
    "p50",
    "p90",
    "p99",
    "mean",
    "min",
    "max_ts_cnt_per_warp",
    "context_buffer_size",
    "log_level",
    "postprocess",
    "library",
    "function",
    "calls",
    "clobber",
    "output_dir",
    "bogus",
]
MAGIC_LINES = [
    "%iket show {cap}",
    "%iket diff {cap} {other}",
    "%iket lint {cap}",
    "%iket report {cap} -o {out}.html",
    "%iket show '{cap}",
    "%iket",
    "%iket rm -rf /",
    "%iket show {cap} --range nosuch",
    "%%iket -o {out}\npass",
    "%%iket -o {out} --max-ts-cnt-per-warp {value}\npass",
    "%%iket -o {out} --context-buffer-size {value}\npass",
    "%%iket -o {out} --calls {value}\npass",
    "%%iket -o {out} --function {value}\npass",
    "%%iket -o {out} --function os:getcwd --calls {value}\nimport os; os.getcwd()",
    "%%iket -o {out} --log-level {value}\npass",
    "%%iket -o {out} --postprocess {value}\npass",
    "%%iket {value}\npass",
    "%%iket -o {out} --isolate --calls 2\npass",
]


def build_stand_in(work: Path) -> Path | None:
    """The session's C stand-in, built with the system's compiler (None: no compiler)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    out = work / "libiket_double.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(out), str(STAND_IN)], check=True)
    return out


def session_env(library: Path, trace: str) -> dict[str, str]:
    return {
        "IKET_CLI_SESSION_LIBRARY": str(library),
        "IKET_DOUBLE_TRACE": str(FIXTURES / "session" / f"{trace}.trace.json"),
    }


def prepare(work: Path, seeds: dict[str, Path]) -> None:
    """The window seeds (a whole capture and a lossy one, made by ``iket_cli.window``), the
    session seeds (the session's indented trace alone in a folder), and the stand-in."""
    library = build_stand_in(work)
    if library is None:
        raise SystemExit("the window kinds need a C compiler for the session's stand-in")
    seeds["library"] = library
    for name, trace in (("window", "plain"), ("window_lossy", "budget1")):
        script = f"import iket_cli\nwith iket_cli.window({str(work / name)!r}):\n    pass\n"
        env = {**os.environ, **session_env(library, trace), "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=work, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"the seed window {name} failed: {done.stderr[-2000:]}")
        seeds[name] = work / name
    for name, trace in (("session", "plain"), ("session_lossy", "budget1")):
        folder = work / name
        folder.mkdir()
        shutil.copy(FIXTURES / "session" / f"{trace}.trace.json", folder / "iket_pid_0x1.trace.json")
        seeds[name] = folder


def damage(kind: str, cap: Path, rng: random.Random, damage_json) -> None:
    """One place of the window capture or the session trace damaged."""
    if kind == "window":
        choice = rng.randrange(3)
        if choice < 2:
            target = cap / "manifest.json"
            under = ("window",) if choice == 0 else ("completeness",)
            target.write_text(damage_json(target.read_text(), rng, under=under))
            return
    target = next(cap.glob("iket_pid_*.trace.json"))
    spared = ("launches",) if rng.random() < 0.5 else ()  # half the time inside the launches
    target.write_text(damage_json(target.read_text(), rng, compact=rng.random() < 0.3, under=spared))


def shows_a_loss(cap: Path) -> bool:
    """Whether a trace of ``cap`` still shows a loss by itself, recounted here apart from iket:
    a launch of one cluster-less grid with fewer warp lifetimes than its grid has warps."""
    for path in cap.glob("iket_pid_*.trace.json"):
        if not path.is_file():
            continue  # a FIFO, a link to a device: nothing to recount
        try:
            document = json.loads(path.read_text())
            launches = document["launches"]
            for launch in launches:
                grid = launch["gridDimX"] * launch["gridDimY"] * launch["gridDimZ"]
                threads = launch["blockDimX"] * launch["blockDimY"] * launch["blockDimZ"]
                warps = grid * -(-threads // 32)
                recorded = {w["locIdx"] for w in launch["warpLifetimes"]}
                if not launch.get("singleClusterActive") and isinstance(warps, int) and len(recorded) < warps:
                    return True
        except (ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError):
            continue
    return False


def lost_as_complete(command: list[str], code: int | None, stdout: str, stderr: str, cap: Path) -> bool:
    """The oracle: a command that ended well on a capture whose trace still shows a loss and
    said nothing of it (a gate that passed on it, a table with no INCOMPLETE, a manifest that
    claims it whole)."""
    if code != 0:
        return False
    said = stdout + stderr
    if command[0] == "diff" and "--fail-over" in command:
        return True  # a gate that passed on lost data
    if command[0] == "show" and "--format" not in command:
        return "INCOMPLETE" not in said
    if command[0] == "lint":
        return not any(code in said for code in ("budget-drop", "empty-launch"))
    if command[0] == "postprocess":
        try:
            record = json.loads((cap / "manifest.json").read_text())
        except (OSError, ValueError):
            return False
        return (record.get("completeness") or {}).get("complete") is not False
    return False


def make(kind: str, rng: random.Random, seeds: dict[str, Path], into: Path, which: int, damage_json):
    """The case's command, its capture, and whether the oracle of losses applies to it."""
    source = seeds[rng.choice(SEEDS_OF[kind])]
    cap = into / "cap"
    shutil.copytree(source, cap, symlinks=True)
    if kind in ("window", "session"):
        damage(kind, cap, rng, damage_json)
        other = seeds["window"]
        words = COMMANDS[kind][which % len(COMMANDS[kind])]
        return [w.format(cap=cap, other=other, out=into / "out") for w in words], cap
    if kind == "mark":
        return ["@pytest", _mark_case(rng, cap, into, damage_json)], cap
    line = rng.choice(MAGIC_LINES).format(
        cap=cap, other=seeds["window"], out=into / "out", value=json.dumps(_value(rng))[:40]
    )
    return ["@ipython", line], cap


def _value(rng: random.Random):
    return rng.choice(
        [
            None,
            True,
            -1,
            0,
            1,
            2**64,
            1.5,
            float("nan"),
            "",
            "5us",
            "x" * 50,
            "1-",
            "\x1b[2J",
            [],
            {},
            {"affine": None},
            {"affine": "5 parsecs"},
            {"affine": 1e308},
            {"nosuch": "1us"},
            {"affine": "1us"},
            "os:getcwd",
            "'",
            "--clobber",
        ]
    )


def _mark_case(rng: random.Random, cap: Path, into: Path, damage_json) -> str:
    """A test file with one random mark (or a plain mark and a damaged baseline); its source."""
    keys = rng.sample(MARK_KEYS, rng.randint(0, 3))
    args = ", ".join(
        [*([repr(_value(rng))] if rng.random() < 0.1 else []), *(f"{key}={_value(rng)!r}" for key in keys)]
    )
    args = args.replace("nan", "float('nan')")
    source = f"import pytest\n\n@pytest.mark.iket({args})\ndef test_it():\n    pass\n"
    (into / "test_case.py").write_text(source)
    if rng.random() < 0.3:  # the same test's baseline, damaged
        base = into / "base" / "test_case.py-test_it"
        shutil.copytree(cap, base)
        damage("window", base, rng, damage_json)
        return "--iket-baseline=base"
    return ""


def run_pytest(extra: str, into: Path, library: Path) -> tuple[int | None, int | None, str, str]:
    """A real pytest with the plugin on the case's test file (a process of its own)."""
    env = {**os.environ, **session_env(library, "plain"), "PYTHONPATH": str(ROOT)}
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        "/dev/null",
        "--rootdir",
        str(into),
        "--iket",
        str(into / "caps"),
        "test_case.py",
        *([extra] if extra else []),
    ]
    try:
        done = subprocess.run(argv, cwd=into, env=env, capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        return None, 14, "", "the time limit"
    signum = -done.returncode if done.returncode < 0 else None
    return (None if signum else done.returncode), signum, done.stdout, done.stderr


def run_magic(line: str, into: Path, library: Path) -> tuple[int | None, int | None, str, str]:
    """The line in a real IPython shell (a process of its own): its output."""
    env = {**os.environ, **session_env(library, "plain"), "PYTHONPATH": str(ROOT)}
    script = (
        "import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\nshell.run_line_magic('load_ext', 'iket_cli')\n"
        f"text = {line!r}\n"
        "if text.startswith('%%'):\n    head, _, body = text.partition('\\n')\n"
        "    shell.run_cell_magic('iket', head[len('%%iket'):].strip(), body)\n"
        "else:\n    shell.run_line_magic('iket', text[len('%iket'):].strip())\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=into, env=env, capture_output=True, text=True, timeout=LIMIT_S
        )
    except subprocess.TimeoutExpired:
        return None, 14, "", "the time limit"
    signum = -done.returncode if done.returncode < 0 else None
    return (None if signum else done.returncode), signum, done.stdout, done.stderr


def judge_host(kind: str, code, signum, stdout: str, stderr: str) -> str | None:
    """What is wrong with a mark's or a magic's end, or None."""
    if signum is not None:
        return f"killed by signal {signum}"
    if "Traceback" in stdout + stderr:
        return "a traceback"
    allowed = (0, 1) if kind == "mark" else (0,)
    if kind == "mark" and code == 4 and "--iket-fail-over" in stdout + stderr:
        return None  # a usage error of the run, said as one
    if code not in allowed:
        return f"exit {code}"
    return None
