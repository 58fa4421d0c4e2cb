"""When run-iket's injection kills the workload (issue 32, item 2: "say what broke").

run-iket 4.8.1 aborts a process that runs a half-precision cuBLAS GEMM (SIGABRT, with no
Python error: see docs/faults.md). On the CPU the real run-iket runs the workload in
both passes (the double replays the GPU's output); a workload that aborts itself with
``os.abort()`` ends the way those do. The CLI must say that the tool failed, not the code,
in the pass where it happened, and what to do.
"""

from __future__ import annotations

import shutil

from iket_cli.model import manifest
from iket_cli.pipeline import attempt

from conftest import FIXTURES

CAPTURE_PASS = "os.environ.get('IKET_INJECTION_CONFIG', '').endswith('iket/iket.config.json')"


def _workload(harness, body: str) -> None:
    (harness.work / "crash.py").write_text(
        f"import os, sys\ndef workload():\n    print('started', flush=True)\n{body}"
    )


def test_an_abort_in_the_tracker_pass_is_the_tool_s(harness):
    _workload(harness, "    os.abort()\n")
    result = harness.profile("-o", "cap2", "crash.py:workload")
    harness.check(result, 1, "killed by SIGABRT (status -6) inside run-iket's injection in the tracker pass")
    assert "most likely NVIDIA's tool failed here, not your code (check: run it without iket)" in (
        result.stderr
    )
    assert "half-precision (bf16 or fp16) cuBLAS GEMMs" in result.stderr
    assert "the injection's own log is in iket.log" in result.stderr
    assert "started" in result.stdout
    # as on the H200: an aborted process leaves no launch list behind, and the line says so
    nothing = "launched before: nothing recorded (run-iket wrote no launch list before the crash)"
    assert nothing in result.stderr
    record = manifest.read(harness.work / "cap2.failed")
    assert record["error"]["type"] == "InjectionCrash" and record["error"]["phase"] == "tracker"


def test_an_abort_in_the_capture_pass_of_a_warp_trace_names_that_pass(harness):
    _workload(harness, f"    if {CAPTURE_PASS}:\n        os.abort()\n")
    env = {"IKET_DOUBLE_WARP_CAPTURE": str(FIXTURES / "warp_multi")}
    result = harness.profile("-o", "cap2", "--warp-trace", "crash.py:workload", env=env)
    harness.check(result, 1, "in the capture pass (--warp-trace runs no tracker pass)")
    assert "tracker pass but fails the capture pass" not in result.stderr, "no drift wording"


def test_an_abort_after_a_python_error_is_the_workload_s(harness):
    """A native library that prints a Python error and then aborts: the workload's failure
    (the checker's no-traceback rule does not apply: this traceback is the workload's own)."""
    said = "print('Traceback (most recent call last):', file=sys.stderr, flush=True)"
    _workload(harness, f"    {said}\n    os.abort()\n")
    result = harness.profile("-o", "cap2", "crash.py:workload")
    assert result.code == 1, result
    assert "iket: error: the workload exited with status -6 (SIGABRT) in the tracker pass" in result.stderr
    assert "run-iket's injection" not in result.stderr
    harness.assert_nothing_left()


def test_a_kill_is_not_a_crash(harness):
    """SIGKILL is the OOM killer's or a user's, not the injection's."""
    _workload(harness, "    import signal\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    result = harness.profile("-o", "cap2", "crash.py:workload")
    harness.check(result, 1, "the workload exited with status -9 (SIGKILL) in the tracker pass")
    assert "run-iket's injection" not in result.stderr


SKIPPED_MODULE = (
    "[warning] IKET could not inspect a CUDA module for instrumentation; the module will be skipped."
)


def test_the_injection_logs_warnings_are_quoted(tmp_path):
    """Each distinct warning or error line once, from every pass's log (the capture's first)."""
    for where, text in (
        ("tracker/pid_0x1", f"[info] started\n{SKIPPED_MODULE}\n"),
        ("iket/pid_0x2", f"{SKIPPED_MODULE}\n[error] gone\n"),
    ):
        (tmp_path / where).mkdir(parents=True)
        (tmp_path / where / "iket.injection.log").write_text(text)
    assert attempt.injection_warnings(tmp_path) == [
        f"injection log: {SKIPPED_MODULE}",
        "injection log: [error] gone",
    ]
    assert attempt.injection_warnings(tmp_path / "nothing") == []


def test_the_kernels_launched_before_are_named_when_run_iket_recorded_them(tmp_path):
    shutil.copytree(FIXTURES / "multi" / "tracker", tmp_path / "tracker")
    [line] = attempt.launched_before(tmp_path)
    assert line.startswith("launched before: ") and "scale_loop_kernel x3" in line
    assert line.endswith(" and 10 more kernel(s)"), "14 kernels: the 4 launched most, then a count"


def test_the_diagnosis_quotes_iket_doctor_gpu_for_this_stack(harness):
    """With a probe table cached for this stack, the crash's diagnosis says what it found;
    without one, it says how to get it."""
    import os

    from iket_cli.capture import probes
    from iket_cli.system import toolchain

    _workload(harness, "    os.abort()\n")
    result = harness.profile("-o", "cap2", "crash.py:workload")
    assert "iket doctor --gpu: not run on this stack yet" in result.stderr, result
    shutil.rmtree(harness.work / "cap2.failed")
    env = harness.env()
    version = toolchain.find(str(harness.double), env).version
    verdicts = [
        probes.Verdict("bf16 GEMM", probes.KILLED, "", 1.0),
        probes.Verdict("fp32 GEMM", probes.SURVIVES, "", 1.0),
    ]
    probes.store(env, probes.stack(version, []), verdicts)
    quoted = harness.profile("-o", "cap2", "crash.py:workload")
    assert "this stack): killed or failed: bf16 GEMM; survived: fp32 GEMM" in quoted.stderr, quoted
    assert os.environ.get("IKET_CACHE_DIR")


PAYLOAD_AT_START_ONLY = """
import os, signal

import cutlass
import cutlass.cute as cute
from cutlass.cute.experimental import iket


@cute.kernel
def bump(x: cute.Tensor):
    load = iket.range_start("load", cutlass.Int32(1))
    x[0] = x[0] + 1.0
    iket.range_end(load)  # no payload: CuTe DSL wants the start's


@cute.jit
def launch(x: cute.Tensor):
    bump(x).launch(grid=(1, 1, 1), block=(32, 1, 1))


def workload():
    import numpy as np
    from cutlass.cute.runtime import from_dlpack

    cute.compile(launch, from_dlpack(np.zeros(4, np.float32)))
    if CAPTURE_PASS:
        os.kill(os.getpid(), signal.SIGSEGV)  # what run-iket 4.8.1's capture pass does on the H200
"""


def test_a_crash_of_a_kernel_whose_range_ends_carry_different_payloads_says_so(harness):
    """A CuTe DSL token range with a payload at its start and none at its end: run-iket 4.8.1's
    capture pass dies of it (SIGSEGV, docs/gpu/pipeline/). The kernel is compiled for real here
    (sm_90a, no GPU needed); the start-up hook records both ends' payloads, and the diagnosis
    names the range and says what to change, not the GEMM hint."""
    source = PAYLOAD_AT_START_ONLY.replace("CAPTURE_PASS", CAPTURE_PASS)
    (harness.work / "ends.py").write_text(source)
    result = harness.profile("-o", "cap2", "ends.py:workload", env={"CUTE_DSL_ARCH": "sm_90a"})
    harness.check(result, 1, "killed by SIGSEGV (status -11) inside run-iket's injection in the capture pass")
    said = "token ranges whose two ends carry different payloads: load (start: i32, end: none)"
    assert said in result.stderr, result
    assert "give range_end the payload its range_start has" in result.stderr
    assert "half-precision" not in result.stderr
    record = manifest.read(harness.work / "cap2.failed")
    assert record["error"]["type"] == "InjectionCrash" and record["error"]["phase"] == "capture"
