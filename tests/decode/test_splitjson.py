"""The JSON export by launches, merged, against the whole export run-iket wrote on the H200."""

import json
import re
import shutil

import pytest

from iket_cli.decode import export, splitjson

from conftest import FIXTURES


@pytest.fixture
def decoder():
    return export.decoder_class()


def test_multi_launch_capture_merges_byte_for_byte(tmp_path, decoder):
    folder = tmp_path / "multi"
    shutil.copytree(FIXTURES / "multi", folder)
    raw = folder / "iket" / "pid_0x23f" / "iket.data.json"
    out = tmp_path / "merged.json"
    assert splitjson.export_json(raw, out, decoder) is True
    assert out.read_bytes() == (FIXTURES / "multi" / "iket_pid_0x23f.trace.json").read_bytes()
    assert sorted(p.name for p in raw.parent.iterdir()) == [
        "iket.data.bin",
        "iket.data.json",
        "iket.injection.log",
    ], "parts cleaned up"


def test_single_launch_is_not_split(tmp_path, decoder):
    raw = FIXTURES / "affine" / "iket" / "pid_0x204" / "iket.data.json"
    assert splitjson.part_manifests(raw) is None
    assert splitjson.export_json(raw, tmp_path / "x.json", decoder) is False


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
    with open(tmp_path / "out", "wb") as handle:
        splitjson.merge(paths, handle)
    merged = json.loads((tmp_path / "out").read_text())
    assert merged["stringTable"] == ["a", "b", "c"]
    assert merged["locationTable"] == [loc[0], loc[1], loc[2]]
    later = merged["launches"][1]
    assert later["markers"] == [{"locIdx": 2, "markerNameIdx": 2}]
    assert later["ranges"] == [{"rangeNameIdx": 1, "warpLocIdxs": [1, 2]}]
    assert later["warpLifetimes"] == [{"locIdx": 1}]
    assert merged["launches"][0] == json.loads(first)["launches"][0]


def test_the_vectorised_remap_equals_the_one_match_at_a_time_rewrite():
    """Random bodies in the export's layout, random table maps (numbers that keep, gain or
    lose digits): the numpy rewrite gives the regular expression's bytes exactly."""
    import random

    rng = random.Random(22)
    for _ in range(200):
        n, m = rng.randint(1, 30), rng.randint(1, 300)
        names = rng.sample(range(n * rng.randint(1, 40)), n)
        locs = rng.sample(range(m * rng.randint(1, 40)), m)
        records = []
        for _ in range(rng.randint(0, 120)):
            pick = rng.random()
            if pick < 0.3:
                records.append(b'{"rangeNameIdx":%d,"rangeType":2}' % rng.randrange(len(names)))
            elif pick < 0.5:
                records.append(
                    b'{"locIdx":%d,"markerNameIdx":%d}'
                    % (rng.randrange(len(locs)), rng.randrange(len(names)))
                )
            elif pick < 0.8:
                entries = b",".join(b"%d" % rng.randrange(len(locs)) for _ in range(rng.randint(0, 3)))
                records.append(b'{"startTs":1796,"warpLocIdxs":[' + entries + b"]}")
            else:
                records.append(b'{"gridId":12,"kernelName":"k_Idx"}')
        body = b",".join(records)
        assert splitjson.remapped(body, names, locs) == remap_slowly(body, names, locs)


#: The rewrite the merge did before it was numpy's: one regular-expression match at a time.
_INDEX = re.compile(rb'"(rangeNameIdx|markerNameIdx|locIdx)":(\d+)|"warpLocIdxs":\[([\d,]*)\]')


def remap_slowly(body: bytes, names: list[int], locs: list[int]) -> bytes:
    """The reference :func:`splitjson.remapped` is held to."""
    name_bytes = [b"%d" % v for v in names]
    loc_bytes = [b"%d" % v for v in locs]

    def one(m: re.Match) -> bytes:
        key = m[1]
        if key is not None:
            table = loc_bytes if key == b"locIdx" else name_bytes
            return b'"' + key + b'":' + table[int(m[2])]
        inner = b",".join(loc_bytes[int(i)] for i in m[3].split(b",") if i)
        return b'"warpLocIdxs":[' + inner + b"]"

    return _INDEX.sub(one, body)
