"""The JSON export by launches, merged, against the whole export run-iket wrote on the H200."""

import json
import shutil

import pytest

from iket_cli.decode import decoder
from iket_cli.decode.split import launches
from iket_cli.decode.split.json import merge as join

from conftest import FIXTURES


@pytest.fixture
def exporter():
    return decoder.decoder_class()


def test_multi_launch_capture_merges_byte_for_byte(tmp_path, exporter):
    folder = tmp_path / "multi"
    shutil.copytree(FIXTURES / "multi", folder)
    raw = folder / "iket" / "pid_0x23f" / "iket.data.json"
    out = tmp_path / "merged.json"
    assert join.export_json(raw, out, exporter) is True
    assert out.read_bytes() == (FIXTURES / "multi" / "iket_pid_0x23f.trace.json").read_bytes()
    assert sorted(p.name for p in raw.parent.iterdir()) == [
        "iket.data.bin",
        "iket.data.json",
        "iket.injection.log",
    ], "parts cleaned up"


def test_single_launch_is_not_split(tmp_path, exporter):
    raw = FIXTURES / "affine" / "iket" / "pid_0x204" / "iket.data.json"
    assert launches.part_manifests(raw) is None
    assert join.export_json(raw, tmp_path / "x.json", exporter) is False


def test_merge_remaps_tables_of_later_parts(tmp_path):
    """Two synthetic parts whose tables overlap in a different order."""

    def part(strings, locations, launch):
        return json.dumps(
            {
                "graphLaunches": {},
                "launches": [launch],
                "locationTable": locations,
                "meta": {"version": 1},
                "stringTable": strings,
            },
            separators=(",", ":"),
        )

    loc = [{"ctaId": [i, 0, 0], "gpcId": 0, "smId": i, "tpcId": 0, "warpId": 0} for i in range(3)]
    first = part(
        ["a", "b"],
        [loc[0], loc[1]],
        {"markers": [{"locIdx": 1, "markerNameIdx": 1}], "ranges": [], "warpLifetimes": []},
    )
    second = part(
        ["b", "c"],
        [loc[2], loc[1]],
        {
            "markers": [{"locIdx": 0, "markerNameIdx": 1}],
            "ranges": [{"rangeNameIdx": 0, "warpLocIdxs": [1, 0]}],
            "warpLifetimes": [{"locIdx": 1}],
        },
    )
    paths = []
    for n, text in enumerate((first, second)):
        paths.append(tmp_path / f"p{n}")
        paths[-1].write_text(text)
    join.merge(paths, tmp_path / "out")
    merged = json.loads((tmp_path / "out").read_text())
    assert merged["stringTable"] == ["a", "b", "c"]
    assert merged["locationTable"] == [loc[0], loc[1], loc[2]]
    later = merged["launches"][1]
    assert later["markers"] == [{"locIdx": 2, "markerNameIdx": 2}]
    assert later["ranges"] == [{"rangeNameIdx": 1, "warpLocIdxs": [1, 2]}]
    assert later["warpLifetimes"] == [{"locIdx": 1}]
    assert merged["launches"][0] == json.loads(first)["launches"][0]
