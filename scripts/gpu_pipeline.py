"""The arrows of every producer/consumer shape and the stage that bounds a pipeline, on the
H200 (issue 33): ``python -m pytest -m gpu scripts/gpu_pipeline.py`` with the CuTe DSL bundle.

``examples/cute_pipeline.py`` is captured in several shapes (one producer warp to four
consumers; two cooperating producers to four, and to one: the shape whose arrows were wrong)
and speeds (a slow ``reduce``). For each capture the arrows iket pairs equal an independent
pairing computed here from the trace JSON (the k-th ``load`` on each producer warp of a CTA
feeds the k-th ``reduce`` on each consumer warp), and ``iket show --pipeline`` names the bound:
``load`` as written, ``reduce`` once it is made many times slower.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here"),
    pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="CuTe DSL is not installed"),
]
SHAPES = {
    "1to4": {},
    "2to4": {"PRODUCER_WARPS": "2"},
    "2to1": {"PRODUCER_WARPS": "2", "CONSUMER_WARPS": "1"},
    "slow-reduce": {"REDUCE_REPEAT": "160"},
}


def keep(name: str, text: str) -> None:
    out = os.environ.get("IKET_GPU_KEEP")
    if out:
        (Path(out) / name).write_text(text)


def iket(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "iket_cli", *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def independent(trace: Path) -> set:
    """(source start, source warp, target start, target warp) of each arrow, from the JSON."""
    doc = json.loads(trace.read_text())
    where = doc["locationTable"]
    found = set()
    for launch in doc["launches"]:
        per: dict = defaultdict(lambda: defaultdict(list))
        for r in launch["ranges"]:
            loc = r["warpLocIdxs"][0]
            name = doc["stringTable"][r["rangeNameIdx"]]
            per[tuple(where[loc]["ctaId"])][(name, loc)].append((r["startTs"], r["endTs"]))
        for cta in per.values():
            loads = {loc: sorted(v) for (name, loc), v in cta.items() if name == "load"}
            reduces = {loc: sorted(v) for (name, loc), v in cta.items() if name == "reduce"}
            assert len({len(v) for v in [*loads.values(), *reduces.values()]}) == 1, "equal counts"
            for sw, src in loads.items():
                for tw, dst in reduces.items():
                    found |= {(s[0], sw, t[0], tw) for s, t in zip(src, dst, strict=True)}
    return found


def paired(trace: Path) -> set:
    from iket_cli.analysis import flows
    from iket_cli.model import annotations
    from iket_cli.model import trace as trace_mod

    loaded = trace_mod.load(trace)
    r = loaded.launches[0].ranges
    got = set()
    for f in flows.pair(loaded, annotations.dags_for(trace)).arrows:
        got.add((r.start[f.source], r.loc[f.source], r.start[f.target], r.loc[f.target]))
    return got


@pytest.mark.parametrize("shape", list(SHAPES))
def test_arrows_and_bound(tmp_path, shape):
    shutil.copy(ROOT / "examples" / "cute_pipeline.py", tmp_path / "cute_pipeline.py")
    done = iket("profile", "cute_pipeline.py", "-o", "cap", cwd=tmp_path, env=SHAPES[shape])
    keep(f"pipeline_{shape}.err", done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    (trace,) = sorted((tmp_path / "cap").glob("iket_pid_*.trace.json"))
    expected, got = independent(trace), paired(trace)
    print(f"\n{shape}: {len(got)} arrows, {len(expected)} expected")
    assert got == expected and got, (len(got), len(expected))
    shown = iket("show", "cap", "--pipeline", "--format", "json", cwd=tmp_path)
    table = iket("show", "cap", "--pipeline", cwd=tmp_path)
    keep(f"pipeline_{shape}.txt", table.stdout + table.stderr)
    (kernel,) = json.loads(shown.stdout)["processes"][0]["kernels"]
    print(f"{shape}: {kernel['sentence']}")
    lag = [s["starved_ns"] for s in kernel["stages"] if s["name"] == "reduce"]
    keep(
        f"pipeline_{shape}.json",
        json.dumps({"arrows": len(got), "pipeline": kernel, "reduce_starved": lag}, indent=1),
    )
    assert kernel["bound"] == ("reduce" if shape == "slow-reduce" else "load"), kernel["sentence"]
    lint = iket("lint", "cap", cwd=tmp_path)
    assert "unpaired-edge" not in lint.stdout + lint.stderr
