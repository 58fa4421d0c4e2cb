"""A kernel out of a real bf16 model (issue 32, item 1) on the GPU:
``python -m pytest -m gpu scripts/gpu_extract.py`` (KERNEL=tirx with the TIRx stack,
KERNEL=cute with the CuTe DSL bundle).

``examples/model_step.py`` is a bf16 Transformer training step (autocast, AdamW) whose forward
calls an instrumented kernel between layers. run-iket 4.8.1 aborts on its bf16 GEMMs, so a
plain capture fails with the injection diagnosis; ``--extract`` records the kernel's call in a
plain run and captures its replay. Checked here: the diagnosis offers --extract; the replay's
result equals the recorded one; ``iket show`` agrees with a recount of the trace JSON (ranges
per name, their durations); ``--calls 3`` saves the third call's own input; ``--replay`` takes
at most half the time of the first ``--extract`` capture. Timings go to the kept files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers of gpu_faults.py beside it
from gpu_faults import ROOT, iket, keep_text, leftovers, settled

KERNEL = os.environ.get("KERNEL", "tirx")
MODULE = {"tirx": "model_tirx_kernel", "cute": "model_cute_kernel"}[KERNEL]
STACK = {"tirx": "tvm_tirx", "cute": "cutlass"}[KERNEL]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
    pytest.mark.skipif(importlib.util.find_spec(STACK) is None, reason=f"{STACK} is not installed"),
]
FUNC = f"{MODULE}:affine"
TIMES: dict[str, float] = {}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp(f"model-{KERNEL}")
    for name in ("model_step.py", f"{MODULE}.py"):
        shutil.copy(ROOT / "examples" / name, folder / name)
    return folder


def run(*args, cwd: Path) -> tuple:
    start = time.monotonic()
    done = iket(*args, cwd=cwd, timeout=600)
    return done, time.monotonic() - start


def recount(trace: Path) -> dict:
    """range name -> (count, total duration) straight from the trace JSON."""
    doc = json.loads(trace.read_text())
    found: dict = defaultdict(list)
    for launch in doc["launches"]:
        for r in launch["ranges"]:
            found[doc["stringTable"][r["rangeNameIdx"]]].append(r["endTs"] - r["startTs"])
    return {name: (len(v), sum(v)) for name, v in found.items()}


def shown(stdout: str) -> dict:
    rows = {}
    for process in json.loads(stdout)["processes"]:
        for kernel in process["kernels"]:
            for row in kernel["ranges"]:
                rows[row["name"]] = (row["durations"]["count"], row["durations"]["total"])
    return rows


def test_a_plain_capture_of_the_model_fails_with_the_diagnosis(work):
    done, took = run("profile", "model_step.py", "-o", "plain", cwd=work)
    keep_text(f"extract_{KERNEL}_plain.err", done.stderr)
    assert done.returncode == 1, done.stderr
    assert "inside run-iket's injection" in done.stderr and "--extract MODULE:FUNC" in done.stderr
    assert "Traceback" not in done.stderr
    TIMES["plain_failed_s"] = round(took, 2)


def test_extract_captures_the_kernel_with_the_model_s_tensors(work):
    done, took = run("profile", "model_step.py", "--extract", FUNC, "-o", "ext", "--json", cwd=work)
    keep_text(f"extract_{KERNEL}_first.err", done.stderr)
    assert done.returncode == 0, done.stderr
    TIMES["extract_s"] = round(took, 2)
    record = json.loads(done.stdout)
    facts = record["extract"]
    TIMES["record_run_s"] = facts["record"]["seconds"]
    assert facts["calls"] == [1]
    assert facts["arguments"][0]["shape"] == [32768] and facts["arguments"][0]["dtype"] == "float32"
    assert facts["replay"]["calls"] == [{"call": 1, "equal": True, "differences": []}], facts["replay"]
    traces = sorted((work / "ext").glob("iket_pid_*.trace.json"))
    assert len(traces) == 1, "only the replay process ran an instrumented kernel"
    counted = recount(traces[0])
    show = iket("show", "ext", "--format", "json", cwd=work)
    assert show.returncode == 0, show.stderr
    assert shown(show.stdout) == counted, (shown(show.stdout), counted)
    assert counted["affine"][0] == 32768 // 32  # one range per warp: 256 CTAs x 4 warps
    assert "a replay of call 1 of" in show.stderr
    from iket_cli.render import report

    page = report.embedded(work / "ext" / record["processes"][0]["artifacts"]["html"]["path"])
    (expected,) = json.loads(show.stdout)["processes"]
    (embedded,) = page["stats"]
    assert Path(expected.pop("trace")).name == embedded.pop("trace")  # relative in the report
    assert embedded == expected, "the report's tables are iket show's numbers"
    assert page["meta"]["extract"].startswith("a replay of call 1 of"), page["meta"]
    keep_text(f"extract_{KERNEL}_recount.json", json.dumps({"recount": counted, "times": TIMES}, indent=1))
    assert settled() == [] and leftovers(work) == []


def test_calls_3_saves_the_third_call(work):
    done, _ = run(
        "profile", "model_step.py", "--extract", FUNC, "--calls", "3", "-o", "third", "--json", cwd=work
    )
    keep_text(f"extract_{KERNEL}_third.err", done.stderr)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)["extract"]
    assert facts["calls"] == [3] and facts["replay"]["calls"][0]["equal"], facts
    compare = (  # in a child: this process must not hold the GPU (settled() checks it is free)
        "import os, sys; sys.path.insert(0, sys.argv[1]); import iket_load, iket_saved\n"
        "def first_input(folder):\n"
        "    index = iket_saved.read_index(folder); call = index['calls'][0]\n"
        "    saved = os.path.join(folder, call['folder'])\n"
        "    part = iket_load.load_part(saved, 'inputs', call['parts']['inputs'], '')\n"
        "    return part[0][0]\n"
        "first, third = first_input(sys.argv[2]), first_input(sys.argv[3])\n"
        "print(first.device.type, tuple(first.shape) == tuple(third.shape), bool((first == third).all()))\n"
    )
    hook = ROOT / "iket_cli" / "capture" / "_hook"
    saved = [work / "ext" / "extract", work / "third" / "extract"]
    done = subprocess.run([sys.executable, "-c", compare, hook, *saved], capture_output=True, text=True)
    # call 3 (step 2, layer 1) is not call 1's input
    assert done.stdout.split() == ["cuda", "True", "False"], done.stdout + done.stderr


FIDELITY = """
import torch
from model_tirx_kernel import N, affine


def step(x, y):
    x.mul_(2)  # in place on an argument: autograd refuses it on a leaf that requires grad
    y.add_(1)  # y may be x itself, or overlap it
    return affine(x.detach().contiguous())
"""

FIDELITY_MODEL = """
import torch
import fidelity_kernels

w = torch.randn(fidelity_kernels.N, device="cuda", requires_grad=True)
x = w * 3  # not a leaf, requires grad
fidelity_kernels.step(x, x)  # the same tensor twice
buf = torch.randn(2 * fidelity_kernels.N, device="cuda")
n = fidelity_kernels.N
fidelity_kernels.step(buf[:n], buf[n // 2 : n // 2 + n])  # overlapping views of one buffer
torch.cuda.synchronize()
print("fidelity model ran", flush=True)
"""


@pytest.mark.skipif(KERNEL != "tirx", reason="one kernel is enough for the saved calls' fidelity")
def test_replay_keeps_leafness_and_aliasing(work):
    """Issue 50, R3-9: a non-leaf tensor that requires grad comes back as one (FUNC writes into
    it in place), ``step(x, x)`` shares one storage again, overlapping views overlap again: the
    replay's results equal the recorded ones, with no warning of hidden state."""
    (work / "fidelity_kernels.py").write_text(FIDELITY)
    (work / "fidelity_model.py").write_text(FIDELITY_MODEL)
    done, _ = run(
        "profile",
        "fidelity_model.py",
        "--extract",
        "fidelity_kernels:step",
        "--calls",
        "1-2",
        "-o",
        "fidelity",
        "--json",
        cwd=work,
    )
    keep_text("extract_fidelity.err", done.stderr)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)["extract"]
    assert [c["equal"] for c in facts["replay"]["calls"]] == [True, True], facts["replay"]
    assert "differs from the recorded one" not in done.stderr
    index = json.loads((work / "fidelity" / "extract" / "calls.json").read_text())
    first, second = (c["parts"]["inputs"] for c in index["calls"])
    assert len(first["storages"]) == 1 and [a["leaf"] for a in first["arrays"]] == [False], first
    assert len(second["storages"]) == 1 and len(second["arrays"]) == 2, second
    print(f"\nfidelity: {facts['replay']['calls']}")
    assert settled() == [] and leftovers(work) == []


def test_replay_is_at_most_half_the_first_capture(work):
    done, took = run("profile", "--replay", "ext", "-o", "again", "--json", cwd=work)
    keep_text(f"extract_{KERNEL}_replay.err", done.stderr)
    assert done.returncode == 0, done.stderr
    TIMES["replay_s"] = round(took, 2)
    TIMES["ratio"] = round(took / TIMES["extract_s"], 3)
    keep_text(f"extract_{KERNEL}_times.json", json.dumps(TIMES, indent=1))
    print(f"\nextract timings ({KERNEL}): {TIMES}")
    assert json.loads(done.stdout)["extract"]["replay"]["calls"][0]["equal"]
    assert took <= 0.5 * TIMES["extract_s"], TIMES


def test_replay_trusts_only_what_was_recorded_here(work, tmp_path):
    """Issue 50, R3-1 on the real stack: the model's saved calls (CUDA tensors) replay by
    default; under another user's cache they are refused until --trust-replay; a planted
    pickle is refused by name even then, and never runs."""
    import pickle

    elsewhere = {**os.environ, "IKET_CACHE_DIR": str(tmp_path / "another-user")}

    def replay(*extra: str) -> subprocess.CompletedProcess:  # as another user of this machine
        argv = [sys.executable, "-m", "iket_cli", "profile", "--replay", "ext", "-o", "foreign", *extra]
        return subprocess.run(
            argv,
            cwd=work,
            env=elsewhere,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )

    refused = replay()
    keep_text(f"replay_{KERNEL}_refused.err", refused.stderr)
    assert refused.returncode == 2 and "not recorded by you on this machine" in refused.stderr, refused.stderr
    trusted = replay("--trust-replay")
    keep_text(f"replay_{KERNEL}_trusted.err", trusted.stderr)
    assert trusted.returncode == 0, trusted.stderr
    planted = work / "planted"
    shutil.copytree(work / "ext", planted)
    marker = work / "PWNED"

    class Planted:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    index_path = planted / "extract" / "calls.json"
    index = json.loads(index_path.read_text())
    data = pickle.dumps(Planted())
    (planted / "extract" / index["calls"][0]["folder"] / "inputs.pkl").write_bytes(data)
    index["calls"][0]["parts"]["inputs"]["pickle"] = len(data)
    index_path.write_text(json.dumps(index))
    done, _ = run("profile", "--replay", "planted", "-o", "pwned", "--trust-replay", cwd=work)
    keep_text(f"replay_{KERNEL}_planted.err", done.stderr)
    assert done.returncode == 2 and "names posix.system" in done.stderr, done.stderr
    assert not marker.exists()
    assert settled() == [] and leftovers(work) == []


def test_doctor_gpu_interrupted_mid_probe_stops_every_probe(tmp_path):
    """Issue 50, R3-5 on the real GPU: Ctrl-C while the probes run (each under run-iket, on the
    GPU): exit 130, no probe left on the GPU, no scratch folder left."""
    import signal

    from gpu_faults import Running

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.environ["TMPDIR"] = str(scratch)
    try:
        running = Running(tmp_path, "doctor", "--gpu", "--refresh")
        deadline = time.monotonic() + 120
        while not gpu_probe_running() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        os.killpg(running.proc.pid, signal.SIGINT)
        code, _, err = running.finish()
    finally:
        os.environ.pop("TMPDIR")
    keep_text("doctor_gpu_interrupted.err", err)
    assert code == 130 and "while probing the GPU; every probe was stopped" in err, err
    assert "Traceback" not in err
    assert settled() == [], "a probe still holds the GPU"
    assert list(scratch.glob("iket-probes-*")) == []


def gpu_probe_running() -> bool:
    from gpu_faults import cmdline

    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return any(b"probe.py" in cmdline(pid) for pid in pids)


def test_doctor_gpu_names_the_half_precision_gemms(tmp_path):
    """Item 3: the probes under the installed run-iket; bf16 and fp16 GEMMs killed, the rest alive."""
    done = iket("doctor", "--gpu", "--refresh", "--json", cwd=tmp_path, timeout=600)
    shown = iket("doctor", "--gpu", cwd=tmp_path, timeout=600)
    keep_text(f"doctor_gpu_{KERNEL}.txt", shown.stdout + shown.stderr)
    keep_text(f"doctor_gpu_{KERNEL}.json", done.stdout)
    assert "Traceback" not in done.stderr, done.stderr
    table = json.loads(done.stdout)["gpu"]
    verdicts = {p["name"]: p["verdict"] for p in table["probes"]}
    print(f"\ndoctor --gpu ({KERNEL}): {verdicts}")
    assert verdicts["bf16 GEMM"] == verdicts["fp16 GEMM"] == "killed", verdicts
    alive = [
        "elementwise",
        "fp32 GEMM",
        "bf16 SDPA",
        "TIRx kernel" if KERNEL == "tirx" else "CuTe DSL kernel",
    ]
    assert all(verdicts[name] == "survives" for name in alive), verdicts
    # cached only where every probe ended with a verdict on the stack (issue 50, R3-15): a probe
    # that failed here (CuTe DSL without its CUDA-toolkit flavour) is probed again next time
    lasting = all(p["verdict"] in ("survives", "killed", "skipped") for p in table["probes"])
    assert ("under run-iket on this GPU (cached" in shown.stdout) == lasting, shown.stdout
    assert settled() == []
