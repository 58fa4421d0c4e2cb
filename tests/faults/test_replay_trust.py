"""``--replay`` never runs code a capture carries, through the real CLI (issue 50: R3-1, R3-2,
R3-6, R3-9, R3-16, R3-18).

Each test records real saved calls (``--extract``, the run-iket double for the passes), then
changes the capture as a sender, a careless user or a damaged disk would, and replays it.
The promise: exit 2 with one line naming the damage or the opt-in, no traceback, no marker
file written by a planted pickle or module, nothing kept that was not asked for.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import time
from pathlib import Path

import pytest
from faults.conftest import MARK, marked_processes

from iket_cli.model import manifest

from conftest import profile_double, replay, run_iket, snapshot, with_path

KERNELS = """
import os

def launch(a, b):
    b[:] = a * 2
    return a.copy()


class Slow:
    def __init__(self):
        self.seen = 0

    def __reduce__(self):
        self.seen += 1
        if self.seen > 1 and os.environ.get("SLOW_SAVE"):  # the save, after the probe
            import time
            time.sleep(60)
        return (Slow, ())


def slow(a, s):
    return a
"""

MODEL = """
import os
import numpy as np
import kernels

buf = np.arange(8.0)
if os.environ.get("ALIASED"):
    kernels.launch(buf[2:6], buf[:4])
elif os.environ.get("SLOW_SAVE"):
    kernels.slow(np.zeros(1 << 20), kernels.Slow())
else:
    kernels.launch(np.arange(8.0), np.zeros(8))
print("model ran", flush=True)
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def cli(double, work: Path, *args, env: dict | None = None, timeout: float = 120):
    return profile_double(double, work, *args, env=env, timeout=timeout)


def recorded(
    double, work: Path, name: str = "xc", function: str = "kernels:launch", env: dict | None = None
) -> Path:
    result = cli(double, work, "model.py", "--extract", function, "-o", name, env=env)
    assert result.code == 0, result
    return work / name


def refused(result, said: str) -> None:
    """Exit 2, one error line that says ``said``, no traceback."""
    assert result.code == 2, result
    assert "Traceback" not in result.stdout + result.stderr, result
    errors = [line for line in result.stderr.splitlines() if line.startswith("iket: error:")]
    assert len(errors) == 1 and said in errors[0], result


def index_of(capture: Path) -> dict:
    return json.loads((capture / "extract" / "calls.json").read_text())


def write_index(capture: Path, index: dict) -> None:
    (capture / "extract" / "calls.json").write_text(json.dumps(index))


def replace_pickle(capture: Path, part: str, value: bytes) -> None:
    """Put ``value`` as call 1's ``part`` pickle, its size recorded as the format wants."""
    index = index_of(capture)
    call = index["calls"][0]
    (capture / "extract" / call["folder"] / f"{part}.pkl").write_bytes(value)
    call["parts"][part]["pickle"] = len(value)
    write_index(capture, index)


class Planted:
    """A pickle that runs a shell command when a plain ``pickle.load`` reads it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


# -- the trust model ---------------------------------------------------------------------------


def test_saved_calls_recorded_elsewhere_need_the_opt_in(work, double, tmp_path_factory):
    capture = recorded(double, work)
    elsewhere = {"IKET_CACHE_DIR": str(tmp_path_factory.mktemp("another-user"))}
    result = cli(double, work, "--replay", "xc", "-o", "again", env=elsewhere)
    refused(result, "its saved calls were not recorded by you on this machine")
    assert "--trust-replay" in result.stderr and not (work / "again").exists()
    assert not (work / "again.failed").exists(), "a refusal before anything ran keeps nothing"
    trusted = cli(double, work, "--replay", "xc", "-o", "again", "--trust-replay", env=elsewhere)
    assert trusted.code == 0, trusted
    # recorded here: no opt-in needed; edited afterwards: not the calls recorded
    assert cli(double, work, "--replay", "xc", "-o", "mine").code == 0
    (capture / "extract" / "call-1" / "inputs" / "0.bin").write_bytes(bytes(64))
    refused(cli(double, work, "--replay", "xc", "-o", "edited"), "were not recorded by you")
    refused(cli(double, work, "--trust-replay", "model.py", "-o", "x"), "--trust-replay needs --replay")


@pytest.mark.parametrize("part", ["inputs", "result"])
def test_a_pickle_that_runs_code_is_refused_even_when_trusted(work, double, part):
    capture = recorded(double, work)
    marker = work / "PWNED"
    replace_pickle(capture, part, pickle.dumps(Planted(marker)))
    result = cli(double, work, "--replay", "xc", "-o", "again", "--trust-replay")
    refused(result, "names posix.system, which a saved call may not hold")
    assert not marker.exists(), "the planted pickle ran"


def test_a_module_outside_the_source_root_or_inside_the_capture_is_refused(work, double):
    capture = recorded(double, work)
    marker = work / "PWNED"
    replace_pickle(capture, "inputs", pickle.dumps(((f"touch {marker}",), {})))
    index = index_of(capture)
    index.update(module="os", qualname="system")
    write_index(capture, index)
    refused(cli(double, work, "--replay", "xc", "-o", "a", "--trust-replay"), "lies outside its source root")
    (capture / "extract" / "evil.py").write_text(f"open({str(marker)!r}, 'w')\ndef launch(a, b): pass\n")
    index.update(module="evil", qualname="launch", path0=str(capture / "extract"))
    write_index(capture, index)
    refused(cli(double, work, "--replay", "xc", "-o", "b", "--trust-replay"), "lies inside the capture")
    index.update(module=str(capture / "extract" / "evil.py"), path0=str(work))
    write_index(capture, index)
    refused(cli(double, work, "--replay", "xc", "-o", "c", "--trust-replay"), "lies inside the capture")
    assert not marker.exists()


# -- what is copied -------------------------------------------------------------------------------


def test_only_the_listed_regular_files_are_copied(work, double, tmp_path):
    capture = recorded(double, work)
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret")
    (capture / "extract" / "notes.txt").symlink_to(secret)
    (capture / "extract" / "call-1" / "extra.bin").write_bytes(b"x" * 100)
    result = cli(double, work, "--replay", "xc", "-o", "again")
    assert result.code == 0, result
    copied = sorted(
        p.relative_to(work / "again" / "extract").as_posix() for p in (work / "again" / "extract").rglob("*")
    )
    assert "notes.txt" not in copied and "call-1/extra.bin" not in copied, copied
    assert all(
        "secret" not in p.read_text(errors="replace") for p in (work / "again").rglob("*") if p.is_file()
    )


@pytest.mark.parametrize("planted", ["secret", "/dev/zero", "fifo", "folder link"])
def test_a_listed_file_that_is_a_link_or_special_is_refused(work, double, tmp_path, planted):
    capture = recorded(double, work)
    target = capture / "extract" / "call-1" / "inputs" / "0.bin"
    target.unlink()
    if planted == "secret":
        (tmp_path / "secret").write_bytes(b"s" * 64)
        target.symlink_to(tmp_path / "secret")
    elif planted == "/dev/zero":
        target.symlink_to("/dev/zero")
    elif planted == "fifo":
        os.mkfifo(target)
    else:
        shutil.move(str(capture / "extract" / "call-1"), str(tmp_path / "moved"))
        (capture / "extract" / "call-1").symlink_to(tmp_path / "moved")
    started = time.monotonic()
    result = cli(double, work, "--replay", "xc", "-o", "again", "--trust-replay", timeout=60)
    assert time.monotonic() - started < 50, "it waited on the planted file"
    refused(result, "the saved calls are damaged")
    assert not (work / "again").exists() and not (work / "again.failed").exists()


def test_calls_json_itself_a_fifo_or_a_link_to_dev_zero(work, double):
    capture = recorded(double, work)
    index = capture / "extract" / "calls.json"
    index.unlink()
    os.mkfifo(index)
    refused(cli(double, work, "--replay", "xc", "-o", "a", timeout=60), "calls.json is not a regular file")
    index.unlink()
    index.symlink_to("/dev/zero")
    refused(cli(double, work, "--replay", "xc", "-o", "a", timeout=60), "calls.json is a symbolic link")


# -- damaged saved calls -------------------------------------------------------------------------


def _truncated(capture, index):
    (capture / "extract" / "call-1" / "inputs" / "0.bin").write_bytes(bytes(30))


def _missing(capture, index):
    (capture / "extract" / "call-1" / "inputs" / "0.bin").unlink()


def _array(change):
    def edit(capture, index):
        change(index["calls"][0]["parts"]["inputs"]["arrays"][0])
        write_index(capture, index)

    return edit


def _storage(change):
    def edit(capture, index):
        change(index["calls"][0]["parts"]["inputs"]["storages"][0])
        write_index(capture, index)

    return edit


def _index(change):
    def edit(capture, index):
        write_index(capture, change(index))

    return edit


def _deep(capture, index):
    (capture / "extract" / "calls.json").write_text("[" * 100_000 + "]" * 100_000)


DAMAGE = [
    ("truncated", _truncated, "call-1/inputs/0.bin holds 30 bytes, 64 expected"),
    ("missing", _missing, "call-1/inputs/0.bin is missing"),
    ("bogus dtype", _array(lambda a: a.update(dtype="bogus")), "dtype 'bogus' is not a numpy dtype"),
    ("huge shape", _array(lambda a: a.update(shape=[2_500_000_000])), "views bytes 0..20000000000"),
    ("negative offset", _array(lambda a: a.update(offset=-8)), "offset is not an offset"),
    ("storage", _array(lambda a: a.update(storage=7)), "names no storage of the part"),
    ("device tpu:9", _storage(lambda st: st.update(device="tpu:9")), "'tpu:9' is not cpu or cuda:N"),
    ("size", _storage(lambda st: st.update(bytes=10**12)), "holds 64 bytes, 1000000000000 expected"),
    (
        "a name",
        _array(lambda a: a.update(name="../../etc/hostname", strides=[8, 8])),
        "do not go with its shape",
    ),
    ("a list", _index(lambda i: [i]), "the index is not an object"),
    ("null", _index(lambda i: None), "the index is not an object"),
    ("calls a string", _index(lambda i: {**i, "calls": "x"}), "calls is not a list"),
    ("call x", _index(lambda i: {**i, "calls": [{**i["calls"][0], "call": "x"}]}), "calls[0].call is not"),
    (
        "no parts",
        _index(lambda i: {**i, "calls": [{"call": 1, "folder": "call-1", "bytes": 0}]}),
        "parts is not",
    ),
    (
        "folder escape",
        _index(lambda i: {**i, "calls": [{**i["calls"][0], "folder": "../../x"}]}),
        "is not call-N",
    ),
    (
        "arguments [1.5]",
        _index(lambda i: {**i, "calls": [{**i["calls"][0], "arguments": [1.5]}]}),
        "list of objects",
    ),
    ("no module", _index(lambda i: {k: v for k, v in i.items() if k != "module"}), "module is not a name"),
    ("old version", _index(lambda i: {**i, "version": 1}), "saved by another iket"),
    ("deep", _deep, "calls.json is not JSON"),
]


@pytest.mark.parametrize(("damage", "said"), [d[1:] for d in DAMAGE], ids=[d[0] for d in DAMAGE])
def test_damaged_saved_calls_are_named(work, double, damage, said):
    capture = recorded(double, work)
    damage(capture, index_of(capture))
    result = cli(double, work, "--replay", "xc", "-o", "again", "--trust-replay")
    refused(result, said)
    assert not (work / "again").exists()


def test_the_replay_checks_again_and_exits_with_a_status_of_its_own(work, double):
    """Damage that comes after the CLI's checks (here: in the copy the passes read) is found by
    the replay itself, which says which call, and the CLI gives exit 2 with its words."""
    capture = recorded(double, work)
    shim = work / "sitecustomize.py"  # damages the copy as the tracker pass starts
    shim.write_text(
        "import os\n"
        "d = os.environ.get('IKET_CLI_EXTRACT_DIR')\n"
        "if d and os.environ.get('IKET_INJECTION_CONFIG'):\n"
        "    open(os.path.join(d, 'call-1', 'inputs', '0.bin'), 'wb').write(bytes(8))\n"
    )
    result = cli(double, work, "--replay", "xc", "-o", "again", env=with_path(work))
    refused(result, "the saved calls in")
    assert "call-1/inputs/0.bin holds 8 bytes, 64 expected" in result.stderr, result
    assert manifest.read(work / "again.failed")["status"] == "failed"
    assert capture.is_dir()


# -- fidelity ------------------------------------------------------------------------------------


def test_views_come_back_sharing_memory(work, double):
    """``launch(buf[2:6], buf[:4])``: FUNC writes b, which overlaps a; the replay gives the same
    result only if the two arguments share memory again (it warned of hidden state before)."""
    result = cli(double, work, "model.py", "--extract", "kernels:launch", "-o", "al", env={"ALIASED": "1"})
    assert result.code == 0, result
    record = manifest.read(work / "al")["extract"]
    assert record["replay"]["calls"] == [{"call": 1, "equal": True, "differences": []}], record
    assert "differs from the recorded one" not in result.stderr
    (part,) = [c["parts"]["inputs"] for c in index_of(work / "al")["calls"]]
    assert len(part["storages"]) == 1 and [a["offset"] for a in part["arrays"]] == [16, 0]


# -- what the record run leaves ----------------------------------------------------------------------


def test_ctrl_c_while_saving_drops_the_partial_call(work, double):
    import subprocess
    import sys
    import uuid

    token = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "CUDA_INJECTION64_PATH"}
    env.update(replay("affine"), SLOW_SAVE="1", **{MARK: token})
    args = ["profile", "--run-iket", str(double), "model.py", "--extract", "kernels:slow", "-o", "cap"]
    cli_proc = subprocess.Popen(
        [sys.executable, "-m", "iket_cli", *args],
        cwd=work,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not list(work.glob(".*iket-staging-*/extract/call-1/inputs/0.bin")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(cli_proc.pid, signal.SIGINT)
    _, err = cli_proc.communicate(timeout=60)
    assert cli_proc.returncode == 130, err
    assert "dropped call 1" in err, err
    evidence = work / "cap.failed" / "extract"
    assert evidence.is_dir() and not list(evidence.glob("call-*")) and not (evidence / ".owner").exists()
    assert marked_processes(token) == []


def test_the_owner_mark_is_not_kept(work, double):
    assert not (recorded(double, work) / "extract" / ".owner").exists()
    failed = cli(double, work, "model.py", "--extract", "kernels:launch", "--calls", "5", "-o", "f")
    assert failed.code == 1, failed
    assert not (work / "f.failed" / "extract" / ".owner").exists()


# -- footguns --------------------------------------------------------------------------------------


def test_replay_dot_inside_a_capture_writes_beside_it(work, double):
    capture = recorded(double, work)
    before = snapshot(capture)
    result = run_iket("profile", "--run-iket", double, "--replay", ".", cwd=capture, env=replay("affine"))
    assert result.code == 0, result
    assert (work / "xc-replay" / "manifest.json").is_file() and snapshot(capture) == before
    inside = cli(double, work, "--replay", "xc", "-o", "xc/sub")
    refused(inside, "would be written inside the one it replays")


def test_replay_of_a_failed_captures_evidence(work, double):
    failed = cli(double, work, "model.py", "--extract", "kernels:launch", "--calls", "5", "-o", "f")
    assert failed.code == 1, failed
    refused(cli(double, work, "--replay", "f.failed", "-o", "x"), "it is a failed capture's evidence")


# -- the readers run nothing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["show", "xc"],
        ["show", "xc", "--by", "warp"],
        ["report", "xc", "-o", "r.html"],
        ["lint", "xc"],
        ["sql", "xc", "SELECT count(*) FROM ranges"],
        ["export", "xc", "-o", "e"],
        ["merge", "m", "xc", "xc2"],
        ["diff", "xc", "xc"],
    ],
    ids=lambda c: " ".join(c),
)
def test_the_reading_commands_never_run_what_a_capture_carries(work, double, command):
    capture = recorded(double, work)
    marker = work / "PWNED"
    replace_pickle(capture, "inputs", pickle.dumps(Planted(marker)))
    (capture / "extract" / "kernels.py").write_text(f"open({str(marker)!r}, 'w')\n")
    index = index_of(capture)
    index.update(module="os", qualname="system", path0=str(capture / "extract"))
    write_index(capture, index)
    if "xc2" in command:
        recorded(double, work, "xc2")
    result = run_iket(*command, cwd=work)
    assert result.code == 0 and "Traceback" not in result.stderr, result
    assert not marker.exists(), f"iket {' '.join(command)} ran code from the capture"
