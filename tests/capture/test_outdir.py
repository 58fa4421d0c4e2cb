import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from iket_cli.capture import outdir
from iket_cli.errors import ExitCode, OutputDirError

from conftest import manifest_text


def make_capture(folder: Path, marker: str = "old") -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(manifest_text(marker=marker))
    (folder / "data.txt").write_text(marker)
    return folder


def test_new_directory_is_accepted(tmp_path):
    assert outdir.check(tmp_path / "new", cwd=tmp_path, clobber=False) == tmp_path / "new"


def test_previous_capture_needs_clobber(tmp_path):
    cap = make_capture(tmp_path / "cap")
    with pytest.raises(OutputDirError) as info:
        outdir.check(cap, cwd=tmp_path, clobber=False)
    assert info.value.exit_code == ExitCode.USAGE
    assert "--clobber" in info.value.hint and "--output-dir" in info.value.hint
    assert outdir.check(cap, cwd=tmp_path, clobber=True) == cap


def test_empty_directory_is_accepted(tmp_path):
    (tmp_path / "empty").mkdir()
    assert outdir.check(tmp_path / "empty", cwd=tmp_path, clobber=False)


@pytest.mark.parametrize("clobber", [False, True])
def test_foreign_folder_and_file_refused_even_with_clobber(tmp_path, clobber):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "code.py").write_text("x")
    with pytest.raises(OutputDirError, match="not an iket capture"):
        outdir.check(tmp_path / "src", cwd=tmp_path, clobber=clobber)
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputDirError, match="not a directory"):
        outdir.check(tmp_path / "file", cwd=tmp_path, clobber=clobber)


def test_symlink_refused_even_to_a_capture(tmp_path):
    cap = make_capture(tmp_path / "cap")
    (tmp_path / "link").symlink_to(cap)
    with pytest.raises(OutputDirError, match="symlink"):
        outdir.check(tmp_path / "link", cwd=tmp_path, clobber=True)


@pytest.mark.parametrize("where", ["cwd", "ancestor", "root", "home", "workload-cwd"])
def test_protected_places_refused(tmp_path, monkeypatch, where):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "a"))
    path = {
        "cwd": Path("."),
        "ancestor": Path(".."),
        "root": Path("/"),
        "home": Path("~"),
        "workload-cwd": other,
    }[where]
    with pytest.raises(OutputDirError, match="refusing it even with --clobber"):
        outdir.check(path, cwd=other if where == "workload-cwd" else work, clobber=True)


def test_lock_is_exclusive_and_released(tmp_path):
    target = tmp_path / "cap"
    with outdir.Lock(target) as lock:
        assert lock.path.read_text().strip() == str(os.getpid())
        with pytest.raises(OutputDirError, match=r"this process is already using .*cap"):
            outdir.Lock(target).acquire()  # a window nested in one into the same folder
        script = (
            f"import pathlib\nfrom iket_cli.capture import outdir\n"
            f"outdir.Lock(pathlib.Path({str(target)!r})).acquire()"
        )
        other = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True
        )  # another command
        assert re.search(r"another iket command is using .* \(pid \d+\)", other.stderr), other.stderr
    assert not lock.path.exists()
    with outdir.Lock(target):
        pass
