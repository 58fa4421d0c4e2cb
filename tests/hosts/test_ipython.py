"""``%load_ext iket_cli`` and ``%%iket`` in a real IPython kernel (nbclient runs a notebook
through ipykernel), against the session's C stand-in (tests/fakes/session_double.c)."""

from __future__ import annotations

import pytest

from iket_cli.model import manifest

from conftest import session_env

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need nbformat, nbclient, ipykernel")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

CELLS = [
    "%load_ext iket_cli",
    "%%iket -o cap\nprint('in the cell')\n1 + 1",
    "cap = _\ncap.range('affine').p50, len(cap.ranges())",
    "import stepper",
    "%%iket -o calls --function stepper:step --calls 2\nfor i in range(3):\n    stepper.step(i)",
    "%%iket -o raised\nraise ValueError('the model diverged')",
    "%iket show cap",
    "%%iket -o cap\npass",
]


def run_notebook(folder, cells=CELLS):
    """The notebook of ``cells`` executed by a fresh IPython kernel in ``folder`` (it
    inherits this process's environment)."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        notebook, timeout=120, allow_errors=True, resources={"metadata": {"path": str(folder)}}
    )
    return client.execute()


def outputs(cell) -> str:
    text = []
    for out in cell.outputs:
        text.append(out.get("text", ""))
        data = out.get("data", {})
        text.append(data.get("text/plain", "") + data.get("text/html", ""))
        if out.get("output_type") == "error":
            text.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(text)


def test_a_notebook_captures_cells_and_shows_them(tmp_path, library, monkeypatch):
    (tmp_path / "stepper.py").write_text("def step(i):\n    return i\n")
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    done = run_notebook(tmp_path)
    cells = done.cells
    shown = outputs(cells[1])
    assert "in the cell" in shown and "affine" in shown and "push/pop" in shown
    assert "<iframe srcdoc=" in shown and ".pftrace</a>" in shown  # the report embedded, the timeline linked
    assert "(192, 1)" in outputs(cells[2])
    where = manifest.read(tmp_path / "calls")["window"]["where"]
    assert where == "stepper:step calls 2 in a notebook cell: for i in range(3):"
    (result,) = [out for out in cells[1].outputs if "text/html" in out.get("data", {})]
    assert "\x1b[" not in result["data"]["text/plain"] and "affine" in result["data"]["text/plain"]
    assert "ValueError: the model diverged" in outputs(cells[5])
    assert manifest.read(tmp_path / "raised.failed")["status"] == "failed"
    assert "affine" in outputs(cells[6])
    assert "iket: error: output directory cap holds a previous capture" in outputs(cells[7])
    assert "Traceback" not in outputs(cells[7]) and "IketInjectionManager" not in "".join(map(outputs, cells))


def test_a_second_window_in_a_kernel_is_refused_in_iket_words(tmp_path, library, monkeypatch):
    """Where a later session kills the kernel (``IKET_CLI_SESSION_WINDOWS=1``) the second %%iket
    cell is refused: one line saying why and what to do, no traceback; the kernel lives."""
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("IKET_CLI_SESSION_WINDOWS", "1")
    cells = ["%load_ext iket_cli", "%%iket -o one\npass", "%%iket -o two\npass", "print('alive')"]
    done = run_notebook(tmp_path, cells).cells
    refused = outputs(done[2])
    assert "iket: error: a second window in this process was not opened" in refused, refused
    assert "IKET_CLI_SESSION_WINDOWS=any" in refused and "Traceback" not in refused
    assert "alive" in outputs(done[3])
    assert manifest.read(tmp_path / "one")["status"] == "ok" and not (tmp_path / "two").exists()


def test_bad_lines_and_modules_are_one_line_errors_and_losses_are_said_once(tmp_path, library, monkeypatch):
    """An unbalanced quote, a --function whose module raises at import, --calls without
    --function, a budget of 0 or -1: each one line, no cell traceback; a lossy cell's table says
    INCOMPLETE once (it said "INCOMPLETE: INCOMPLETE:")."""
    (tmp_path / "badmod.py").write_text("raise RuntimeError('broken at import')\n")
    for key, value in session_env(library, "budget1").items():
        monkeypatch.setenv(key, value)
    cells = [
        "%load_ext iket_cli",
        "%iket show 'c",
        "%%iket -o a --function badmod:f\npass",
        "%%iket -o b --calls 3\npass",
        "%%iket -o c --max-ts-cnt-per-warp -1\npass",
        "%%iket -o d --max-ts-cnt-per-warp 0\npass",
        "%%iket -o lossy --context-buffer-size 64M\npass",
        "print('alive')",
    ]
    done = run_notebook(tmp_path, cells).cells
    said = [outputs(cell) for cell in done]
    assert "iket: error: %iket show 'c: No closing quotation" in said[1]
    assert "cannot import badmod: RuntimeError: broken at import" in said[2]
    assert "--calls chooses calls of --function" in said[3]
    assert "is not a budget of timestamps per warp" in said[4] and "is not a budget" in said[5]
    assert all("Traceback" not in text for text in said), said
    table = said[6].split("<pre>")[0]  # the text form (the HTML form repeats it)
    assert "INCOMPLETE: INCOMPLETE" not in said[6] and table.count("recorded nothing") == 1, said[6]
    assert manifest.read(tmp_path / "lossy")["window"]["context_buffer_size"] == 64 << 20
    assert "alive" in said[7]


def test_isolate_captures_a_self_contained_cell_again_and_a_crash_keeps_the_kernel(
    tmp_path, library, monkeypatch
):
    """A later session killed its process (the stand-in: a second Start): the second in-kernel
    window is refused, saying --isolate; ``%%iket --isolate`` runs the cell in a child, as
    often as asked; a child that dies is one line, its evidence kept, the kernel alive."""
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("IKET_CLI_SESSION_WINDOWS", "1")
    monkeypatch.setenv("IKET_DOUBLE_CRASH", "second-start")
    cells = [
        "%load_ext iket_cli",
        "%%iket -o one\npass",
        "%%iket -o two\npass",
        "%%iket --isolate -o two\nprint('in the child', flush=True)",
        "%%iket --isolate -o again{n}\npass",
        "%%iket --isolate -o crash\nimport os, signal\nos.kill(os.getpid(), signal.SIGSEGV)",
        "%%iket --isolate -o raised\nraise ValueError('the model diverged')",
        "print('alive')",
    ]
    done = run_notebook(tmp_path, cells).cells
    said = [outputs(cell) for cell in done]
    assert "a second window in this process was not opened" in said[2] and "--isolate" in said[2]
    assert "in the child" in said[3] and "affine" in said[3], said[3]
    assert manifest.read(tmp_path / "two")["status"] == "ok"
    assert manifest.read(tmp_path / "again3")["status"] == "ok"  # {n}: the third window (one refused)
    assert "the cell's own process (--isolate) died with SIGSEGV (signal 11)" in said[5], said[5]
    assert manifest.read(tmp_path / "crash.failed")["status"] == "failed"
    assert "ValueError" in said[6] and manifest.read(tmp_path / "raised.failed")["status"] == "failed"
    assert "alive" in said[7]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")], "nothing staged or locked"


def test_the_example_notebook_stops_at_its_first_gpu_cell_with_a_readable_message(tmp_path, monkeypatch):
    """On a machine without a GPU the example's first code cell says what it needs and where to
    look, and no later cell runs (nbclient stops at the first error, as Jupyter's Run All does)."""
    from conftest import ROOT

    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here, whatever the machine has
    notebook = nbformat.read(ROOT / "examples" / "notebook.ipynb", as_version=4)
    assert all(cell.get("id") for cell in notebook.cells), "every cell has an id"
    client = nbclient.NotebookClient(notebook, timeout=120, resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(nbclient.exceptions.CellExecutionError) as stopped:
        client.execute()
    assert "This notebook needs an NVIDIA GPU (Hopper) and the IKET stack" in str(stopped.value)
    ran = [cell for cell in notebook.cells if cell.cell_type == "code" and cell.get("execution_count")]
    assert [cell.id for cell in ran] == ["setup"]


def test_a_cell_that_makes_fewer_calls_than_asked_says_which_it_holds(tmp_path, library, monkeypatch):
    """``%%iket --function F --calls 2-9`` on a cell that made 3 calls published "calls 2-9",
    complete; now it holds calls 2-3, said as a loss (INCOMPLETE in the table and the manifest)."""
    (tmp_path / "stepper.py").write_text("def step(i):\n    return i\n")
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    cells = [
        "%load_ext iket_cli",
        "import stepper",
        "%%iket -o calls --function stepper:step --calls 2-9\nfor i in range(3):\n    stepper.step(i)",
    ]
    said = outputs(run_notebook(tmp_path, cells).cells[2])
    record = manifest.read(tmp_path / "calls")
    assert record["window"]["calls"] == [2, 3] and record["window"]["asked"] == [2, 9]
    assert record["completeness"]["complete"] is False and "INCOMPLETE" in said, said
    assert "the run made 3, so it holds calls 2-3 only" in said
