"""See the in-process windows on a machine without a GPU: ``iket_cli.window``, ``%%iket`` in an
IPython shell, and pytest's ``@pytest.mark.iket``, against the session's C stand-in.

    python scripts/demo_windows.py [-o DIR]        (default ./iket-demo-windows)

The stand-in (``tests/fakes/session_double.c``, built here with the system's C compiler) speaks
NVIDIA's session C ABI and saves the trace an H100 session saved of the seed kernel: no kernel
runs, but everything iket does around a window does — the capture published, the table, the
report, the pytest gates and JUnit properties, the notebook cell's result; every window of the
pytest run in its one process, as with run-iket 4.8.1's session. On a GPU:
``examples/test_kernels.py``, ``examples/notebook.ipynb``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = """import pytest

@pytest.mark.iket(max={"affine": "1us"})
def test_seed_is_fast():
    pass

@pytest.mark.iket(p50={"affine": "100ns"})
def test_a_gate_that_fails():
    pass
"""
CELL = (
    "from IPython.core.interactiveshell import InteractiveShell\n"
    "shell = InteractiveShell.instance()\n"
    "shell.run_line_magic('load_ext', 'iket_cli')\n"
    "result = shell.run_cell_magic('iket', '-o cell --clobber', 'print(\"the cell ran\")')\n"
    "print(result)\n"
)


SCRIPT = (
    "import iket_cli\nwith iket_cli.window('script', clobber=True) as w:\n    pass\n"
    "print(w.capture.output_dir)"
)


def steps(out: Path) -> list[tuple[str, list[str], int]]:
    """(title, command, the exit it ends with): the pytest run fails its one failing gate."""
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null", "--rootdir"]
    return [
        ("a window in a script", [sys.executable, "-c", SCRIPT], 0),
        ("iket show of it", [sys.executable, "-m", "iket_cli", "show", "script"], 0),
        ("%%iket in an IPython shell", [sys.executable, "-c", CELL], 0),
        (
            "pytest --iket: two window tests in one process",
            [*pytest, str(out), "--iket", "caps", "-rA", "test_demo_windows.py"],
            1,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", dest="out", type=Path, default=Path("iket-demo-windows"))
    out = parser.parse_args().out.resolve()
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        print("demo_windows: no C compiler here to build the session's stand-in (apt-get install gcc)")
        return 2
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="iket-demo-windows-") as scratch:
        library = Path(scratch) / "libiket_double.so"
        stand_in = ROOT / "tests" / "fakes" / "session_double.c"
        subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(stand_in)], check=True)
        env = {
            **os.environ,
            "IKET_CLI_SESSION_LIBRARY": str(library),
            "IKET_DOUBLE_TRACE": str(ROOT / "tests" / "fixtures" / "session" / "plain.trace.json"),
        }
        (out / "test_demo_windows.py").write_text(TESTS)
        code = 0
        for title, argv, expected in steps(out):
            print(f"\n== {title}", flush=True)
            done = subprocess.run(argv, cwd=out, env=env)
            code = code or int(done.returncode != expected)
    print(f"\nThe captures are in {out}: script/, cell/, caps/ (iket show, iket report, a browser).")
    return code


if __name__ == "__main__":
    sys.exit(main())
