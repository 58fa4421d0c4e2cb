"""The warps each launch of a raw capture holds a record of (model/rawwarps.py)."""

import json
import shutil
from pathlib import Path

import pytest

from iket_cli.model import rawwarps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _manifest(folder: Path) -> Path:
    return next(folder.glob("iket/pid_*/iket.data.json"))


@pytest.mark.parametrize("name", ["affine", "multi", "cute_affine", "cute_pipeline", "warp_multi", "spawn"])
def test_every_warp_of_a_whole_capture_has_its_record(name):
    found = rawwarps.read(_manifest(FIXTURES / name))
    assert found, name
    raw = json.loads(_manifest(FIXTURES / name).read_text())
    assert len(found) == sum(1 for launch in raw["launches"] if launch["canDecode"])
    assert all(launch.dropped == 0 and launch.recorded == launch.warps for launch in found)


def test_multi_counts_its_grids_warps_and_budget():
    found = rawwarps.read(_manifest(FIXTURES / "multi"))
    scale = [launch for launch in found if launch.kernel == "scale_loop_kernel"]
    assert [launch.warps for launch in scale] == [4 * 128 // 32] * 3
    assert {launch.budget for launch in found} == {16}
    assert [launch.index for launch in found] == [1, 2, 3, 4]  # the raw capture's order, torch's first


def _zeroed(tmp_path: Path, slots: dict[int, list[int]]) -> Path:
    """A copy of multi with the first word of the given warp slots (per launch index) zeroed."""
    folder = tmp_path / "multi"
    shutil.copytree(FIXTURES / "multi", folder)
    manifest = _manifest(folder)
    raw = json.loads(manifest.read_text())
    data = bytearray((manifest.parent / "iket.data.bin").read_bytes())
    for index, warps in slots.items():
        launch = raw["launches"][index]
        for warp in warps:
            at = launch["dataRef"]["offset"] + warp * launch["warpBufferSize"]
            data[at : at + 4] = bytes(4)
    (manifest.parent / "iket.data.bin").write_bytes(bytes(data))
    return manifest


def test_a_slot_left_empty_is_a_dropped_warp(tmp_path):
    found = rawwarps.read(_zeroed(tmp_path, {1: [0, 5], 2: list(range(16))}))
    assert [(launch.index, launch.recorded, launch.dropped) for launch in found] == [
        (1, 14, 2),
        (2, 0, 16),
        (3, 16, 0),
        (4, 16, 0),
    ]


def test_a_launch_not_in_the_known_layout_is_left_out(tmp_path):
    manifest = _zeroed(tmp_path, {})
    raw = json.loads(manifest.read_text())
    raw["launches"][1]["dataRef"]["size"] -= 80  # one slot short: not one slot per warp
    raw["launches"][2]["dataRef"]["filename"] = "../elsewhere.bin"
    manifest.write_text(json.dumps(raw))
    assert [launch.index for launch in rawwarps.read(manifest)] == [3, 4]


def test_a_missing_or_unreadable_manifest_reads_as_none(tmp_path):
    assert rawwarps.read(tmp_path / "iket.data.json") is None
    (tmp_path / "iket.data.json").write_text("{not json")
    assert rawwarps.read(tmp_path / "iket.data.json") is None
