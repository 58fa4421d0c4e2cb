"""IKET's injection log read into losses (model/injection_log.py): the library's own strings."""

from collections import Counter

import pytest

from iket_cli.model import injection_log
from iket_cli.model.completeness import BUDGET, CUDA_GRAPH, LAUNCHES, NESTED_GRAPH, READBACK, RECORDS

DROPPED = (
    "[2026-12-07 01:00:00.000] [IketInjectionManager] [warning] Trace incomplete: 24 warp record(s) dropped "
    "because the warp emitted more events than maxTsCntPerWarp=3 allows => kernel: scale_loop_kernel. "
    "Raise maxTsCntPerWarp to capture them; a discovery pass reports a suitable value."
)


def test_a_budget_drop_names_its_kernel_records_and_budget():
    said = injection_log.said(DROPPED)
    assert (said.cause, said.lost, said.kernel, said.records, said.budget) == (
        BUDGET,
        RECORDS,
        "scale_loop_kernel",
        24,
        3,
    )


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        ("[warning] IKET cannot collect trace data for a CUDA Graph launch that was not prepared "
         "for profiling.", CUDA_GRAPH),
        ("[info] IKET does not currently profile kernels nested in child or conditional CUDA Graph nodes.",
         NESTED_GRAPH),
        ("[warning] IKET could not finish pending trace-data copies within 5s while releasing CUDA context "
         "0x55d0; remaining trace data will be dropped.", READBACK),
        ("[error] IKET could not collect trace data for launch 12; its CUDA context is no longer available.",
         READBACK),
    ],
)  # fmt: skip
def test_each_known_message_is_a_loss_of_launches(line, cause):
    said = injection_log.said(line)
    assert said is not None and (said.cause, said.lost) == (cause, LAUNCHES)


@pytest.mark.parametrize(
    "line",
    [
        "[info] IKET prepared 1 existing CUDA contexts and 28 loaded modules for profiling.",
        "[info] IKET profiling session completed with trace data for 2 CUDA launches.",
        "multi_kernel ok",
        "",
    ],
)
def test_other_lines_are_no_loss(line):
    assert injection_log.said(line) is None


def test_failed_operations_and_skipped_modules_are_counted_not_losses():
    found = injection_log.read_lines(
        [
            'IKET profiling operation failed with CUDA error 0001 ("invalid argument").',
            'IKET profiling operation failed with CUDA error 0001 ("invalid argument").',
            "[warning] IKET could not inspect a CUDA module for instrumentation; the module will be skipped.",
            DROPPED,
        ]
    )
    assert found.failed_operations == Counter({(1, "invalid argument"): 2})
    assert found.skipped_modules == 1
    assert [s.cause for s in found.losses] == [BUDGET]


def test_the_logs_of_every_process_folder_are_read(tmp_path):
    for pid, text in (("pid_0x10", DROPPED), ("pid_0x11", "nothing\n"), ("other", DROPPED)):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / injection_log.LOG_FILE).write_text(text + "\n")
    assert len(injection_log.read(tmp_path).losses) == 1, "pid_* folders only"
