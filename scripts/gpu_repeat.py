"""Repeated captures and the noise-aware gate on the GPU (issue 18): ``pytest -m gpu scripts/gpu_repeat.py``.

``examples/two_stage.py`` (two ranges, ``fixed`` and ``work``, a few microseconds each) is
captured with ``--repeat 5`` three times unchanged and once with ``work`` made about 10%
slower (``WORK=2200``). Then:

* ``iket diff`` between the unchanged captures (every ordered pair) and from each of them to
  the slower one, at the thresholds below, through the CLI (``gate_cli.json``);
* ``bench/bench_gate.py`` on the four: the rank test's false-alarm and detection rates,
  resampled, against the single-capture rule's (``gate.json``).

Captures and figures go to ``$IKET_GPU_KEEP``.
A repeat that fails (a workload failing in its third run) gives a ``partial`` capture.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KEEP = Path(os.environ.get("IKET_GPU_KEEP", "/tmp/iket-gpu-keep"))
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
    pytest.mark.skipif(importlib.util.find_spec("tvm_tirx") is None, reason="TIRx is not installed"),
]
REPEATS = 5
#: The threshold for pairs of unchanged captures (a false alarm is any range flagged) and for
#: the 10% slower stage.
QUIET, SLOWER = "2%", "5%"


def iket(*args, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "iket_cli", *map(str, args)],
        env={**os.environ, "PYTHONPATH": path, **(env or {})},
        capture_output=True,
        text=True,
        timeout=500,
        cwd=KEEP,
    )
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def capture(name: str, work: int) -> Path:
    out = KEEP / name
    target = f"{ROOT / 'examples' / 'two_stage.py'}:workload"
    done = iket("profile", target, "-o", out, "--clobber", "--repeat", REPEATS, env={"WORK": str(work)})
    (KEEP / f"{name}.err").write_text(done.stderr)
    print(f"== {name}\n{done.stderr[-900:]}")
    return out


def test_repeated_captures_and_the_gate():
    KEEP.mkdir(parents=True, exist_ok=True)
    bases = [capture(f"base{i}", 2000) for i in (1, 2, 3)]
    slower = capture("slower", 2200)
    records = {p.name: json.loads((p / "manifest.json").read_text()) for p in [*bases, slower]}
    for name, record in records.items():
        print(name, record["status"], [(r["status"], r["capture_s"]) for r in record["repeats"]])
        assert record["status"] == "ok" and len(record["repeats"]) == REPEATS
    shown = iket("show", bases[0])
    (KEEP / "base1.show.txt").write_text(shown.stdout)
    print(shown.stdout[:1500])
    cli = {"unchanged": {}, "slower": {}}
    for a, b in itertools.permutations(bases, 2):
        done = iket("diff", a, b, "--fail-over", QUIET, "--format", "json", check=False)
        flagged = [c["range"] for c in json.loads(done.stdout)["changes"] if c["regression"]]
        cli["unchanged"][f"{a.name}->{b.name}"] = {"exit": done.returncode, "flagged": flagged}
    for base in bases:
        done = iket("diff", base, slower, "--fail-over", SLOWER, "--format", "json", check=False)
        changes = {c["range"]: c for c in json.loads(done.stdout)["changes"]}
        cli["slower"][base.name] = {
            "exit": done.returncode,
            "work": [changes["work"]["ratio"], changes["work"]["p_value"], changes["work"]["regression"]],
            "fixed": [changes["fixed"]["ratio"], changes["fixed"]["p_value"], changes["fixed"]["regression"]],
        }
    gate = [ROOT / "bench" / "bench_gate.py", "--unchanged", *bases, "--slower", slower]
    figures = subprocess.run(  # the rates, resampled from these captures
        [sys.executable, *gate, "--json", KEEP / "gate.json"],
        capture_output=True,
        text=True,
        check=True,
    )
    print(figures.stdout)
    (KEEP / "gate_cli.json").write_text(json.dumps(cli, indent=2))
    print(json.dumps(cli, indent=1)[:3000])
    rates = json.loads((KEEP / "gate.json").read_text())["by_threshold"]
    assert all(entry["work"][2] for entry in cli["slower"].values()), "10% slower work is flagged"
    assert not any(entry["fixed"][2] for entry in cli["slower"].values()), "the unchanged stage is not"
    assert rates["5.0%"]["work"]["rank 5v5 caught"] > 0.9


PARTIAL = (
    "import os, sys\n"
    "sys.path.insert(0, os.environ['EXAMPLES'])\n"
    "import profile_affine\n"
    "def workload():\n"
    "    with open('runs.txt', 'a') as f:\n"
    "        f.write('x')\n"
    "    if len(open('runs.txt').read()) == 3:\n"
    "        sys.exit('the third run fails on purpose')\n"
    "    profile_affine.workload()\n"
)


def test_a_failed_repeat_keeps_the_others(tmp_path):
    (tmp_path / "w.py").write_text(PARTIAL)
    args = ["profile", "w.py:workload", "-o", KEEP / "partial", "--clobber", "--repeat", "3"]
    args += ["--tracker", "fresh"]
    done = subprocess.run(
        [sys.executable, "-m", "iket_cli", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "EXAMPLES": str(ROOT / "examples")},
        capture_output=True,
        text=True,
        timeout=400,
    )
    (KEEP / "partial.err").write_text(done.stderr)
    print(done.stderr[-1500:])
    assert done.returncode == 0, done.stderr
    record = json.loads((KEEP / "partial" / "manifest.json").read_text())
    assert record["status"] == "partial"
    assert [r["status"] for r in record["repeats"]] == ["ok", "failed", "ok"]
