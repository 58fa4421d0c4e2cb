"""``%%iket --isolate``: a self-contained cell run by a fresh IPython in a process of its own.

Where the installed run-iket's session kills a process in a later window
(:mod:`iket_cli.model.runiket_facts`), a notebook kernel keeps one window; a cell that needs
nothing the kernel defined (it imports and builds what it runs) can still be captured, again and
again, each time in a child: the child runs the same ``%%iket`` line (without ``--isolate``) on
the cell in an IPython shell of its own, in the kernel's folder with its ``sys.path``, and
publishes the capture as the kernel would; its output is shown in the cell as it comes. A child
that dies (a signal in NVIDIA's session or the workload) leaves its evidence in ``DIR.failed/``,
said in one line; the kernel lives on."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import IketError

#: What the child exits with: the cell raised (its traceback shown), iket refused (one line).
CELL_RAISED, REFUSED = 1, 2


def run(line: str, cell: str, output_dir: str) -> Path | None:
    """Run ``%%iket LINE`` (``--isolate`` taken out, ``-o`` resolved to ``output_dir``) on
    ``cell`` in a child; the published capture's folder, or None (the reason already shown)."""
    from ..system import spawn

    spec = {"line": line, "cell": cell, "cwd": os.getcwd(), "path": [p for p in sys.path if p]}
    with tempfile.TemporaryDirectory(prefix="iket-cell-") as folder:
        given = Path(folder) / "cell.json"
        given.write_text(json.dumps(spec))
        proc = spawn.start([sys.executable, "-m", "iket_cli.hosts.ipython", str(given)],
                           stdout=spawn.PIPE, stderr=spawn.STDOUT, text=True, new_session=True)  # fmt: skip
        try:
            for text in proc.stdout:  # the cell's output, as it comes
                sys.stdout.write(text)
            proc.wait()
        except BaseException:  # an interrupt of the cell: its process goes too
            spawn.kill_group(proc)
            raise
    if proc.returncode == 0:
        return Path(output_dir)
    if proc.returncode < 0:
        _died(Path(output_dir), proc.returncode)
    return None


def _died(output: Path, returncode: int) -> None:
    from ..pipeline.window_finish import died
    from ..system.signals import ended_by

    what = ended_by(returncode)
    try:
        kept = died(output, f"the cell's process died with {what} inside its window")
    except (IketError, OSError):
        kept = None
    where = f"; its evidence: {kept}" if kept is not None else ""
    sys.stderr.write(f"iket: error: the cell's own process (--isolate) died with {what}{where}\n")


def main(spec_path: str, run_cell: Any) -> int:
    """The child (``python -m iket_cli.hosts.ipython SPEC``): the kernel's folder and path, a
    fresh IPython shell, the ``%%iket`` cell run by ``run_cell`` (:func:`.ipython.run_cell`)."""
    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    os.chdir(spec["cwd"])
    sys.path[:] = [p for p in spec["path"] if p] or sys.path
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        captured = run_cell(shell, spec["line"], spec["cell"])
    except IketError as error:
        hint = f"\n  hint: {error.hint}" if error.hint else ""
        sys.stderr.write(f"iket: error: {error.message}{hint}\n")
        return REFUSED
    return 0 if captured is not None else CELL_RAISED
