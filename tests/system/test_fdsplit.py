"""A file descriptor split while a block runs: the injection's lines to a log, the rest through."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lines_are_split_in_order_and_the_descriptor_restored(tmp_path):
    script = textwrap.dedent("""
        import os, sys
        from pathlib import Path
        from iket_cli.system.fdsplit import Split
        print("before", flush=True)
        with Split(1, lambda line: line.startswith("[lib]"), Path(sys.argv[1])) as split:
            print("user 1", flush=True)
            os.write(1, b"[lib] one\\nuser 2\\n[lib] two")
            os.write(1, b" continued\\n")
            print("user 3", flush=True)
        print("after", split.kept, flush=True)
    """)
    log = tmp_path / "iket.log"
    done = subprocess.run([sys.executable, "-c", script, str(log)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before", "user 1", "user 2", "user 3", "after 2"]
    assert log.read_text() == "[lib] one\n[lib] two continued\n"
