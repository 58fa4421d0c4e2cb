"""Issue 62 on the GPU: one IPython kernel (nbclient) runs five ``%%iket`` cells in a row with no
restart, and each capture's ranges are recounted from its trace JSON and held against a
two-pass capture of the same kernel.

    python3 scripts/gpu_notebook62.py OUT        (nbclient, ipykernel: carried wheels, .whl/)

Cells: the seed kernel, the model's call 3 (``--function model_step:affine --calls 3``), the seed
again, a kernel compiled in a cell between windows, a cell that raises. Where the installed
run-iket keeps one window a process (model/runiket_facts.py), the cells after the first run
with ``--isolate``. Prints one JSON line per capture and one verdict line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

BETWEEN = """
from tvm_tirx.backend.cuda.iket import IketProfiler
from tvm_tirx.script import tirx as T

@T.function
def doubled(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64)):
        profiler = IketProfiler()
        tid = T.cuda.thread_idx("x")
        profiler.range_push("doubled")
        B[tid] = T.float32(2) * A[tid]
        profiler.range_pop()
"""


#: A kernel compiled in a cell of its own, between two windows (in the cell itself with --isolate).
COMPILE_B = (
    "import torch\nfrom between_kernel import doubled\nfrom tvm_tirx.backend.cuda.iket import IketProfiler\n"
    "kernel = IketProfiler().compile(doubled, target='cuda')\n"
    "a = torch.arange(64, dtype=torch.float32, device='cuda'); b = torch.empty_like(a)\n"
)


def cells(isolate: str, out: Path) -> list[str]:
    """The notebook: five windows, the later ones in processes of their own where ``isolate``."""
    again = bool(isolate)
    return [
        "%load_ext iket_cli\nimport sys, iket_cli\n"
        f"sys.path[:0] = ['examples', {str(out)!r}]\niket_cli.prepare()",
        "import profile_affine, model_step, torch",
        "%%iket -o nb/seed1 --clobber\nprofile_affine.workload()",
        f"%%iket {isolate}-o nb/model3 --clobber --function model_step:affine --calls 3\n"
        + ("import model_step\n" if again else "")
        + "model_step.main()",
        f"%%iket {isolate}-o nb/seed2 --clobber\n"
        + ("import profile_affine\n" if again else "")
        + "profile_affine.workload()",
        COMPILE_B,
        f"%%iket {isolate}-o nb/between --clobber\n"
        + (COMPILE_B if again else "")
        + "kernel(a, b); torch.cuda.synchronize()",
        f"%%iket {isolate}-o nb/raises --clobber\nraise ValueError('a cell that raises')",
        "print('kernel alive')",
    ]


def recount(folder: Path) -> dict[str, int]:
    """Ranges per name, from the trace JSON itself."""
    counts: dict[str, int] = {}
    for trace in folder.glob("iket_pid_*.trace.json"):
        data = json.loads(trace.read_text())
        names = data["stringTable"]
        for launch in data["launches"]:
            for r in launch["ranges"]:
                counts[names[r["rangeNameIdx"]]] = counts.get(names[r["rangeNameIdx"]], 0) + 1
    return counts


def shown(folder: Path) -> dict[str, int]:
    """Ranges per name, as ``iket show --format json`` says."""
    done = subprocess.run([sys.executable, "-m", "iket_cli", "show", str(folder), "--format", "json"],
                          capture_output=True, text=True)  # fmt: skip
    counts: dict[str, int] = {}
    for process in json.loads(done.stdout)["processes"]:
        for kernel in process["kernels"]:
            for r in kernel["ranges"]:
                counts[r["name"]] = counts.get(r["name"], 0) + r["durations"]["count"]
    return counts


def two_pass(out: Path) -> dict[str, Path]:
    """The same kernels captured by the two passes."""
    made = {}
    jobs = {
        "seed": ["examples/profile_affine.py:workload"],
        "model3": ["examples/model_step.py", "--extract", "model_tirx_kernel:affine", "--calls", "3"],
    }
    for name, target in jobs.items():
        folder = out / f"twopass-{name}"
        argv = [sys.executable, "-m", "iket_cli", "profile", *target, "-o", str(folder), "--clobber", "-q"]
        subprocess.run(argv, cwd=HERE, timeout=400)
        made[name] = folder
    return made


def main() -> None:
    import nbclient
    import nbformat

    from iket_cli.model import runiket_facts

    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "between_kernel.py").write_text(BETWEEN)
    isolate = "--isolate " if runiket_facts.installed().more_windows_risky() else ""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells(isolate, out)])
    started = time.monotonic()
    client = nbclient.NotebookClient(notebook, timeout=600, allow_errors=True,
                                     resources={"metadata": {"path": str(HERE)}})  # fmt: skip
    done = client.execute()
    seconds = time.monotonic() - started
    texts = []
    for cell in done.cells:
        said = [o.get("text", "") + json.dumps(o.get("data", {}).get("text/plain", "")) for o in cell.outputs]
        texts.append("".join(said) + "".join(f"{o['ename']}: {o['evalue']}" for o in cell.outputs
                                             if o.get("output_type") == "error"))  # fmt: skip
    (out / "notebook.out.json").write_text(json.dumps(texts, indent=1))
    print(
        json.dumps(
            {"isolate": bool(isolate), "seconds": round(seconds, 1), "alive": "kernel alive" in texts[-1]}
        )
    )
    references = two_pass(out)
    verdict = True
    for name, reference in (("seed1", "seed"), ("model3", "model3"), ("seed2", "seed"), ("between", None)):
        folder = HERE / "nb" / name
        record = (
            json.loads((folder / "manifest.json").read_text()) if (folder / "manifest.json").is_file() else {}
        )
        counted, table = (recount(folder), shown(folder)) if record else ({}, {})
        expected = recount(references[reference]) if reference else None
        ok = bool(record) and counted == table and (expected is None or counted == expected) and bool(counted)
        verdict &= ok
        print(json.dumps({"cell": name, "status": record.get("status"), "recount": counted, "show": table,
                          "two_pass": expected, "ok": ok}))  # fmt: skip
    raised = (HERE / "nb" / "raises.failed" / "manifest.json").is_file()
    print(
        f"notebook: {'PASS' if verdict and raised else 'FAIL'} (the raising cell's evidence kept: {raised})"
    )


if __name__ == "__main__":
    main()
