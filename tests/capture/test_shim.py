"""The shim, run as run-iket runs it: as a file, under a plain interpreter."""

import subprocess
import sys

from iket_cli.capture.targets import SHIM


def shim(*args, cwd):
    return subprocess.run([sys.executable, str(SHIM), *args], cwd=cwd, capture_output=True)


def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    code = "import sys, os; os.write(1, b'ok \\xff\\xfe bad\\n'); os.write(2, b'err \\xc3\\n')"
    proc = shim("exec", sys.executable, "-c", code, cwd=tmp_path)
    assert proc.returncode == 0
    out = proc.stdout.decode("utf-8")  # strict: must be valid UTF-8 now
    assert "ok \ufffd\ufffd bad" in out
    assert "err \ufffd" in out


def test_exec_passes_exit_status_and_args(tmp_path):
    proc = shim(
        "exec", sys.executable, "-c", "import sys; print(sys.argv[1:]); sys.exit(7)", "a", cwd=tmp_path
    )
    assert proc.returncode == 7
    assert b"['a']" in proc.stdout


def test_call_imports_without_running_main_block(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 'helper'\n")
    (tmp_path / "w.py").write_text(
        "import sys, helper\n"
        "def work():\n    print('work', helper.VALUE, sys.argv[1:])\n"
        "if __name__ == '__main__':\n    print('MAIN BLOCK RAN')\n"
    )
    proc = shim("call", str(tmp_path / "w.py"), "work", "x", cwd="/")
    assert proc.returncode == 0, proc
    assert proc.stdout.decode().strip() == "work helper ['x']"


def test_call_module_and_missing_function(tmp_path):
    (tmp_path / "mod.py").write_text("def work():\n    print('mod work')\nthing = 3\n")
    assert shim("call", "mod", "work", cwd=tmp_path).stdout.strip() == b"mod work"
    missing = shim("call", "mod", "nope", cwd=tmp_path)
    assert missing.returncode == 2 and b"has no attribute 'nope'" in missing.stdout
    bad = shim("call", "mod", "thing", cwd=tmp_path)
    assert bad.returncode == 2 and b"is not callable" in bad.stdout


def test_exec_of_missing_program(tmp_path):
    proc = shim("exec", "no-such-program-iket", cwd=tmp_path)
    assert proc.returncode == 127 and b"cannot run" in proc.stdout
