"""What a capture carries beside its traces, damaged, through the reading commands (issue 50:
R3-3 warp roles, R3-4 DAG files, R3-7 manifest fields, R3-17 diff's derived rows, R3-8 on a
terminal). Each ends in one line and a documented exit code: no traceback, no hang, no
gigabytes of memory."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import time

import pytest

from conftest import FIXTURES

PIPELINE = FIXTURES / "cute_pipeline"
DAG = "rowsum_pipeline.iket_dag.json"
#: Every reader of a pipelined capture's DAG and roles.
READERS = [
    ["show", "pipe", "--pipeline"],
    ["show", "pipe", "--by", "role"],
    ["report", "pipe", "-o", "r.html"],
    ["lint", "pipe"],
    ["diff", "pipe", "pipe"],
    ["export", "pipe", "-o", "tables"],
    ["sql", "pipe", "SELECT count(*) FROM ranges"],
]


@pytest.fixture
def pipe(harness):
    shutil.copytree(PIPELINE, harness.work / "pipe")
    return harness.work / "pipe"


def _limited(harness, args, *, memory_gb: float = 2.0, timeout: float = 60):
    """The CLI under an address-space limit: a reader that materialises gigabytes fails."""
    import resource
    import sys

    limit = int(memory_gb * (1 << 30))
    done = subprocess.run(
        [sys.executable, "-m", "iket_cli", *map(str, args)],
        cwd=harness.work,
        env=harness.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    from conftest import Result

    return Result(done.returncode, done.stdout, done.stderr, args)


# -- R3-3: warp roles out of bounds ---------------------------------------------------------------


@pytest.mark.parametrize("end", [2**62, 10**9, 33])
@pytest.mark.parametrize("given", ["own", "--roles"])
def test_roles_outside_a_cta_are_refused(harness, pipe, end, given):
    roles = json.loads((pipe / "kernel_symbols.json").read_text())
    roles["warps"]["Consumer"]["warp_end"] = end
    target = pipe / "kernel_symbols.json" if given == "own" else harness.work / "roles.json"
    target.write_text(json.dumps(roles))
    extra = [] if given == "own" else ["--roles", target]
    result = _limited(harness, ["show", "pipe", "--by", "role", *extra])
    harness.check(result, 2, "outside a CTA's 32")


def test_roles_select_by_comparison(harness, pipe):
    result = harness.run("show", "pipe", "--by", "role", "--format", "json")
    harness.check(result, 0)
    groups = {p["group"] for p in json.loads(result.stdout)["processes"]}
    assert groups >= {"role Producer", "role Consumer"}, groups


# -- R3-4: DAG files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:1] + c[2:3]))
@pytest.mark.parametrize("planted", ["fifo", "/dev/zero"])
def test_a_dag_that_is_a_fifo_or_endless_is_refused(harness, pipe, command, planted):
    dag = pipe / DAG
    dag.unlink()
    if planted == "fifo":
        os.mkfifo(dag)
    else:
        dag.symlink_to("/dev/zero")
    started = time.monotonic()
    result = _limited(harness, command, timeout=60)
    assert time.monotonic() - started < 50
    assert "Traceback" not in result.stderr, result
    if result.code != 0:  # a reader that needs the DAG names it; the others do without it
        errors = [line for line in result.stderr.splitlines() if line.startswith("iket: error:")]
        assert result.code == 2 and len(errors) == 1 and DAG in errors[0], result


@pytest.mark.parametrize("command", READERS[:4], ids=lambda c: " ".join(c[:1] + c[2:3]))
def test_a_region_name_that_is_no_text(harness, pipe, command):
    """A lone surrogate (JSON spells it ``\\udcff``) as a region: no file or terminal takes it."""
    text = (pipe / DAG).read_text()
    dag = json.loads(text)
    source = dag["edges"][0]["source"]
    (pipe / DAG).write_text(text.replace(f'"{source}"', '"\\udcff"'))
    result = harness.run(*command)
    harness.check(result, 2, "edges[0] has no source and target region")


def test_duplicate_edges_are_read_once_and_too_many_refused(harness, pipe):
    dag = json.loads((pipe / DAG).read_text())
    dag["edges"] = dag["edges"] * 2000
    (pipe / DAG).write_text(json.dumps(dag))
    started = time.monotonic()
    result = harness.run("show", "pipe", "--pipeline", "--format", "json")
    took = time.monotonic() - started
    harness.check(result, 0)
    assert took < 5, f"{len(dag['edges'])} edges took {took:.1f} s"
    dag["edges"] = [{"source": f"r{i}", "target": f"r{i + 1}"} for i in range(20_001)]
    (pipe / DAG).write_text(json.dumps(dag))
    harness.check(harness.run("show", "pipe", "--pipeline"), 2, "more than the 10,000 iket reads")


# -- R3-7: manifest fields -------------------------------------------------------------------------


def _extract(calls=None, **over):
    record = {
        "function": "kernels:launch",
        "calls": [1] if calls is None else calls,
        "arguments": [],
        "bytes": 0,
        "record": {"seconds": 1.0, "status": "ok", "pid": 1, "rank": None},
        "replay_of": None,
        "replay": None,
    }
    record.update(over)
    return record


MANIFEST_EDITS = [
    ("extract.calls 5", lambda m: m.update(extract=_extract(calls=5)), "extract.calls should be list"),
    (
        "extract.calls [x]",
        lambda m: m.update(extract=_extract(calls=["x"])),
        "extract.calls is not a list of",
    ),
    ("extract.record x", lambda m: m.update(extract=_extract(record="x")), "extract.record should be"),
    (
        "replay.calls [5]",
        lambda m: m.update(extract=_extract(replay={"calls": [5]})),
        "replay.calls[0] is not",
    ),
    (
        "replay.calls x",
        lambda m: m.update(extract=_extract(replay={"calls": "x"})),
        "replay.calls is not a list",
    ),
    ("command [1, 2]", lambda m: m.update(command=[1, 2]), "command is not a list of words"),
    ("lint ['x']", lambda m: m.update(lint=["x"]), "lint[0] is not a finding"),
    (
        "lint without hint",
        lambda m: m.update(lint=[{"code": "c", "message": "m", "kernel": None}]),
        "lint[0]",
    ),
    ("drift [5]", lambda m: m.update(drift=[5]), "drift is not a list of sentences"),
    ("lint 5", lambda m: m.update(lint=5), "lint should be list"),
    ("extract 'x'", lambda m: m.update(extract="x"), "extract should be dict/null"),
    ("gpus [true]", lambda m: m["versions"].update(gpus=[True]), "versions.gpus is not a list of GPUs"),
    (
        "uninstrumented without kernel",
        lambda m: m["processes"][0].update(uninstrumented=[{"launches": 3}]),
        "uninstrumented[0] has no kernel",
    ),
    (
        "uninstrumented grid 5",
        lambda m: m["processes"][0].update(
            uninstrumented=[{"kernel": "k", "short": "k", "launches": 1, "grid": 5, "block": [1, 1, 1]}]
        ),
        "uninstrumented[0] has no grid and block",
    ),
    (
        "payload_sites string",
        lambda m: m["processes"][0].update(payload_sites=["mark"]),
        "payload_sites[0] has no op and name",
    ),
]


@pytest.mark.parametrize("command", [["show"], ["report", "-o", "r.html"], ["lint"], ["diff", "cap"]])
@pytest.mark.parametrize(
    ("edit", "said"), [m[1:] for m in MANIFEST_EDITS], ids=[m[0] for m in MANIFEST_EDITS]
)
def test_manifest_fields_of_another_type(harness, command, edit, said):
    folder = harness.work / "edited"
    shutil.copytree(harness.work / "cap", folder)
    record = json.loads((folder / "manifest.json").read_text())
    edit(record)
    (folder / "manifest.json").write_text(json.dumps(record))
    result = harness.run(command[0], "edited", *command[1:])
    harness.check(result, 2, "does not follow the manifest schema")
    assert said in result.stderr, result


# -- R3-17: a user range named as a derived row --------------------------------------------------------


def test_diff_keeps_a_range_named_like_a_period_row_apart(harness, pipe):
    trace = next(pipe.glob("iket_pid_*.trace.json"))
    doc = json.loads(trace.read_text())
    dag = json.loads((pipe / DAG).read_text())
    stage = dag["edges"][0]["source"]
    doc["stringTable"].append(f"{stage} (period)")
    launch = doc["launches"][0]
    first = launch["ranges"][0]
    launch["ranges"].append({**first, "rangeNameIdx": len(doc["stringTable"]) - 1})
    trace.write_text(json.dumps(doc))
    result = harness.run("diff", "pipe", "pipe", "--format", "json")
    harness.check(result, 0)
    rows = [row["range"] for row in json.loads(result.stdout)["changes"]]
    assert f"{stage} (period)" in rows and f"{stage} (period) [iket]" in rows, rows


# -- R3-8: names on a terminal ----------------------------------------------------------------------------


def _on_terminal(harness, args) -> str:
    """The CLI's stdout and stderr as a terminal shows them."""
    import sys

    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "iket_cli", *map(str, args)],
        cwd=harness.work,
        env=harness.env({"COLUMNS": "200"}),
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            data = os.read(controller, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(controller)
    return b"".join(chunks).decode(errors="replace")


ESCAPES = "\x1b]0;owned\x07\x1b[2J"


def _dangerous(text: str) -> bool:
    return "\x1b]0;" in text or "\x07" in text or "\x1b[2J" in text


@pytest.mark.parametrize(
    "args", [["--format", "csv"], ["--format", "markdown"], []], ids=["csv", "md", "table"]
)
def test_show_on_a_terminal_spells_escapes_out(harness, args):
    folder = harness.work / "named"
    shutil.copytree(harness.work / "cap", folder)
    trace = next(folder.glob("iket_pid_*.trace.json"))
    doc = json.loads(trace.read_text())
    doc["stringTable"][0] = ESCAPES
    trace.write_text(json.dumps(doc))
    record = json.loads((folder / "manifest.json").read_text())
    record["extract"] = _extract(function=f"kernels:{ESCAPES}")
    (folder / "manifest.json").write_text(json.dumps(record))
    shown = _on_terminal(harness, ["show", "named", *args])
    assert not _dangerous(shown), repr(shown)
    assert "\\x1b]0;owned" in shown and "this capture is a replay" in shown, repr(shown)
    piped = harness.run("show", "named", *args)
    if "csv" in args:  # machine output in a pipe keeps the names as they are
        assert ESCAPES in piped.stdout


def test_show_pipeline_csv_on_a_terminal(harness, pipe):
    trace = next(pipe.glob("iket_pid_*.trace.json"))
    doc = json.loads(trace.read_text())
    doc["launches"][0]["kernelName"] = f"k{ESCAPES}"
    trace.write_text(json.dumps(doc))
    shown = _on_terminal(harness, ["show", "pipe", "--pipeline", "--format", "csv"])
    assert not _dangerous(shown) and "\\x1b]0;owned" in shown, repr(shown)
