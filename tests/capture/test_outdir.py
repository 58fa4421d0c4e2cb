import json
import os
from pathlib import Path

import pytest

from iket_cli.capture import outdir
from iket_cli.errors import ExitCode, OutputDirError


def make_capture(folder: Path, marker: str = "old") -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"schema_version": 1, "marker": marker}))
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
        with pytest.raises(OutputDirError, match=r"another iket capture .* is running \(pid \d+\)"):
            outdir.Lock(target).acquire()
    assert not lock.path.exists()
    with outdir.Lock(target):
        pass


def test_publish_new_and_replace_atomically(tmp_path):
    dest = tmp_path / "cap"
    staging = outdir.Staging(dest)
    staging.log_path.write_text("log one")
    (staging.finalize() / "manifest.json").write_text('{"schema_version": 1}')
    assert staging.publish() == dest
    assert (dest / "iket.log").read_text() == "log one"
    assert not staging.root.exists()

    second = outdir.Staging(dest)
    (second.finalize() / "manifest.json").write_text('{"schema_version": 1, "n": 2}')
    second.publish()
    assert '"n": 2' in (dest / "manifest.json").read_text()
    assert not (dest / "iket.log").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["cap"]


def test_fail_replaces_previous_failure_only(tmp_path):
    dest = tmp_path / "cap"
    for n in (1, 2):
        staging = outdir.Staging(dest)
        staging.log_path.write_text(f"failure {n}")
        (staging.finalize() / "manifest.json").write_text('{"schema_version": 1}')
        assert staging.fail() == tmp_path / "cap.failed"
    assert (tmp_path / "cap.failed" / "iket.log").read_text() == "failure 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap.failed"]


def test_fail_never_deletes_a_foreign_failed_folder(tmp_path):
    dest = tmp_path / "cap"
    (tmp_path / "cap.failed").mkdir()
    (tmp_path / "cap.failed" / "mine.txt").write_text("user data")
    staging = outdir.Staging(dest)
    where = staging.fail()
    assert where == staging.root and where.exists()
    assert (tmp_path / "cap.failed" / "mine.txt").read_text() == "user data"


def test_exchange_swaps(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    outdir._exchange(a, b)
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"
