from iket_cli.analysis import overhead
from iket_cli.model import trace
from iket_cli.render.progress import overhead_line

from conftest import FIXTURES, write_trace


def _instrumented(path):
    write_trace(
        path,
        ["r", "m"],
        [
            {  # 2 warps, 2 ranges and 1 mark: 2.5 events per warp; span 600 ns
                "kernel": "k",
                "ranges": [(0, 0, 110, 200), (0, 1, 160, 300)],
                "markers": [(1, 0, 120)],
                "warps": [(0, 100, 600), (1, 150, 700)],
            },
            {
                "kernel": "k",
                "ranges": [(0, 0, 1010, 1100), (0, 1, 1060, 1200)],
                "markers": [(1, 1, 1020)],
                "warps": [(0, 1000, 1800), (1, 1000, 1700)],
            },
        ],
        locations=2,
    )
    return trace.load(path)


def _plain(path):
    write_trace(
        path,
        [],
        [
            {"kernel": "k", "ranges": [], "markers": [], "warps": [(0, 0, 400), (1, 0, 300)]},
            {"kernel": "k", "ranges": [], "markers": [], "warps": [(0, 900, 1400)]},
            {
                "kernel": "at::vectorized_elementwise_kernel",
                "ranges": [],
                "markers": [],
                "warps": [(0, 0, 9)],
            },
        ],
        locations=2,
    )
    return trace.load(path)


def test_overhead_per_kernel_from_warp_spans(tmp_path):
    rows = overhead.compare([_instrumented(tmp_path / "a.json")], [_plain(tmp_path / "b.json")])
    assert rows == [
        {
            "kernel": "k",
            "launches": 2,
            "uninstrumented_launches": 2,
            "instrumented_ns": 700,  # median of 600 and 800
            "uninstrumented_ns": 450,  # median of 400 and 500
            "overhead_ns": 250,
            "overhead_share": 0.5556,
            "events_per_warp": 2.5,
            "ns_per_event": 100.0,
            "at_resolution_limit": False,
        }
    ], "the kernel only the plain run launched (PyTorch's) is left out"
    line = overhead_line(rows[0])
    assert "k: 450 ns without instrumentation, 700 ns with (+56%, 100.0 ns per event" in line


def test_a_kernel_missing_from_the_plain_run_gives_no_row(tmp_path):
    instrumented = _instrumented(tmp_path / "a.json")
    assert overhead.compare([instrumented], []) == []


def test_the_same_capture_on_both_sides_costs_nothing():
    multi = trace.load(next((FIXTURES / "multi").glob("*.trace.json")))
    rows = {r["kernel"]: r for r in overhead.compare([multi], [multi])}
    assert set(rows) == {"scale_loop_kernel", "copy_kernel_kernel"}
    assert all(r["overhead_ns"] == 0 and r["overhead_share"] == 0 for r in rows.values())
    assert all(r["at_resolution_limit"] for r in rows.values())
    assert rows["scale_loop_kernel"]["launches"] == 3


def test_the_h200_warp_trace_run_of_multi_kernel():
    """The real --overhead pair from the H200 (scripts/gpu_check.py): these kernels are so
    short that the instrumentation's cost hides below one 32 ns timer step."""
    multi = trace.load(next((FIXTURES / "multi").glob("*.trace.json")))
    rows = overhead.measure(FIXTURES / "multi", FIXTURES / "warp_multi")
    assert len(overhead.compare([multi], [])) == 0
    by_kernel = {r["kernel"]: r for r in rows}
    assert set(by_kernel) == {"scale_loop_kernel", "copy_kernel_kernel"}, "PyTorch's kernels left out"
    scale = by_kernel["scale_loop_kernel"]
    assert (scale["launches"], scale["uninstrumented_launches"], scale["events_per_warp"]) == (3, 3, 12.0)
    assert all(r["at_resolution_limit"] for r in rows)
    assert "too small to measure" in overhead_line(scale)
