"""A capture opened once for the reading commands (model/reading.py)."""

import shutil

import pytest

from iket_cli.errors import ManifestError
from iket_cli.model import trace as trace_mod
from iket_cli.model.reading import open_capture
from tests.conftest import FIXTURES, run_iket


def test_a_folder_without_a_manifest_is_opened_by_its_traces():
    opened = open_capture(FIXTURES / "multi")
    assert opened.manifest is None and opened.folder == FIXTURES / "multi"
    (found,) = opened.found
    assert found.label == "0x23f" and found.path.name == "iket_pid_0x23f.trace.json"
    assert found.beside.process is None


def test_the_filters_apply_to_traces_and_not_to_unfiltered():
    opened = open_capture(FIXTURES / "multi", kernel="scale*", launch=None)
    assert opened.filtered == {"kernel": "scale*"}
    ((_, chosen),) = opened.traces()
    ((_, whole),) = opened.unfiltered()
    assert {launch.kernel for launch in chosen.launches} == {"scale_loop_kernel"}
    assert len(whole.launches) > len(chosen.launches)
    again = trace_mod.select(trace_mod.load(opened.found[0].path), kernel="scale*")
    assert [x.kernel for x in again.launches] == [x.kernel for x in chosen.launches]


def test_a_published_capture_is_opened_by_its_manifest(tmp_path):
    shutil.copytree(FIXTURES / "affine", tmp_path / "cap")
    assert run_iket("postprocess", tmp_path / "cap", "--format", "json", cwd=tmp_path).code == 0
    for location in (tmp_path / "cap", tmp_path / "cap" / "manifest.json"):
        opened = open_capture(location)
        assert opened.manifest is not None and opened.manifest["status"] == "ok"
        (found,) = opened.found
        assert found.beside.process is not None and found.beside.process["pid_hex"] == "0x204"
    trace = next((tmp_path / "cap").glob("*.trace.json"))
    alone = open_capture(trace)
    assert alone.manifest is None and alone.folder == tmp_path / "cap" and alone.found[0].path == trace


def test_nothing_to_read_is_a_manifest_error(tmp_path):
    with pytest.raises(ManifestError, match="holds no JSON trace"):
        open_capture(tmp_path)
    with pytest.raises(ManifestError, match="does not exist"):
        open_capture(tmp_path / "nowhere")
