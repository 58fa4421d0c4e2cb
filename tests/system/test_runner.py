import subprocess
import sys
import time

import pytest

from iket_cli.errors import CaptureTimeout, ExitCode
from iket_cli.system import runner, tree

from conftest import all_gone

TREE = (
    "import subprocess, sys, time\n"
    "a = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "b = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
    "print(a.pid, b.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_streams_lines_and_replaces_bad_bytes(tmp_path):
    lines = []
    code = "import os; os.write(1, b'one\\n'); os.write(2, b'two \\xff\\n'); raise SystemExit(4)"
    result = runner.run_streaming([sys.executable, "-c", code], env={}, cwd=tmp_path, on_line=lines.append)
    assert result.returncode == 4
    assert sorted(line.text for line in lines) == ["one", "two \ufffd"]
    assert all(line.tool for line in lines), "run-iket's own output, not the workload's FIFO"
    assert result.tail == lines


def test_timeout_kills_every_descendant(tmp_path):
    lines = []
    start = time.monotonic()
    with pytest.raises(CaptureTimeout) as info:
        runner.run_streaming(
            [sys.executable, "-c", TREE], env={}, cwd=tmp_path, on_line=lines.append, timeout=2
        )
    assert info.value.exit_code == ExitCode.TIMEOUT
    assert time.monotonic() - start < 15
    pids = [int(p) for p in lines[0].text.split()]
    assert all_gone(pids), "the child in its own session is gone too"


def test_descendants_walks_the_tree():
    with subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True) as proc:
        try:
            pids = [int(p) for p in proc.stdout.readline().split()]
            assert set(pids) <= set(tree.descendants(proc.pid))
        finally:
            tree.kill_tree(proc)
    assert all_gone([proc.pid, *pids])


def test_missing_program_is_a_clear_error(tmp_path):
    with pytest.raises(Exception, match="cannot start"):
        runner.run_streaming(["/nonexistent/prog"], env={}, cwd=tmp_path, on_line=print)
