"""Run a notebook's code cells in an IPython shell (the GPU machine has IPython from a carried
wheel, no Jupyter): each cell's outcome on one line, a capture's table and report checked.

    python3 scripts/gpu_notebook.py examples/notebook.ipynb WORKDIR
"""

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(HERE / "examples"), str(HERE)]


def main() -> None:
    notebook, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    for number, cell in enumerate(cells, 1):
        source = "".join(cell["source"])
        result = shell.run_cell(source)
        value = shell.user_ns.get("_")
        line = {"cell": number, "source": source.splitlines()[0][:60], "ok": result.success}
        if type(value).__name__ == "NotebookCapture" and source.startswith("%%iket"):
            page = value._repr_html_()
            line.update(folder=str(value.output_dir), status=value.manifest["status"],
                        where=value.manifest["window"]["where"], ranges=value.ranges()[:3],
                        table="push/pop" in value.summary(), report="<iframe srcdoc=" in page,
                        pftrace=".pftrace</a>" in page)  # fmt: skip
        print("CELL", json.dumps(line, default=str)[:900], flush=True)


if __name__ == "__main__":
    main()
