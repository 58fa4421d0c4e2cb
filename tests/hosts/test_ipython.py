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
    """Without IKET_CLI_SESSION_AGAIN the second %%iket cell is refused (GPU: a later session
    can kill the kernel): one line saying why and what to do, no traceback; the kernel lives."""
    for key, value in session_env(library).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("IKET_CLI_SESSION_AGAIN")
    cells = ["%load_ext iket_cli", "%%iket -o one\npass", "%%iket -o two\npass", "print('alive')"]
    done = run_notebook(tmp_path, cells).cells
    refused = outputs(done[2])
    assert "iket: error: a second window in this process was not opened" in refused, refused
    assert "IKET_CLI_SESSION_AGAIN=1" in refused and "Traceback" not in refused
    assert "alive" in outputs(done[3])
    assert manifest.read(tmp_path / "one")["status"] == "ok" and not (tmp_path / "two").exists()
