"""Pass drift (analysis.drift): launch lists of the two passes compared, kernels named as people read them."""

from __future__ import annotations

import json
from pathlib import Path

from iket_cli.analysis import drift

#: Two instantiations of one PyTorch kernel template, as the driver names them (mangled).
ABS = (
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_12_GLOBAL__N_110AbsFunctorIfEE"
    "St5arrayIPcLm2EEEEviT0_T1_"
)
ADD = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_"


def write(folder: Path, name: str, kernels: list[str]) -> None:
    (folder / "pid_0x1").mkdir(parents=True)
    (folder / "pid_0x1" / name).write_text(json.dumps({"launches": [{"kernelName": k} for k in kernels]}))


def test_drift_names_kernels_readably_and_apart(tmp_path):
    write(tmp_path / "tracker", "tracker.json", [ABS, ABS, ADD, "plain_kernel"])
    write(tmp_path / "iket", "iket.data.json", [ABS, ADD, "plain_kernel"])
    (problem,) = drift.check(tmp_path)
    assert problem.startswith("at::native::vectorized_elementwise_kernel<") and "Abs" in problem
    assert "_ZN" not in problem and "2 launch(es) in the tracker pass, 1 in the capture pass" in problem


def test_passes_that_agree_and_a_warp_trace_say_nothing(tmp_path):
    write(tmp_path / "tracker", "tracker.json", [ABS, "k"])
    write(tmp_path / "iket", "iket.data.json", ["k", ABS])
    assert drift.check(tmp_path) == []
    assert drift.check(tmp_path / "nothing") == []
