"""The JSON export, split by launch and merged back byte for byte.

The decoder's JSON export grows faster than the capture: on keep256 (two launches) the
whole export took 15.0 s here while each launch alone took 2.8 s, init included. A raw
capture manifest that keeps one launch decodes on its own, so each decodable launch can
be exported in parallel and the results merged. The parts differ only in their tables:
each has its own ``stringTable`` and ``locationTable``, and the whole export's tables are
those of the first part followed by each later part's new entries, in the order they
appear. Merging therefore appends new table entries and rewrites the four index fields of
the later parts' launches (``rangeNameIdx``, ``markerNameIdx``, ``locIdx``,
``warpLocIdxs``); everything else is copied as bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

#: Huge strings are written in slices, so a 907 MB JSON export is never held twice.
WRITE_SLICE = 1 << 26

_LAUNCHES = b'"launches":['
_TABLES = b'],"locationTable":'
_INDEX = re.compile(rb'"(rangeNameIdx|markerNameIdx|locIdx)":(\d+)|"warpLocIdxs":\[([\d,]*)\]')


def part_manifests(raw: Path) -> list[Path] | None:
    """Write one raw manifest per decodable launch beside ``raw``; None if not worth it.

    The parts sit in the same folder, so their data references (relative file names; the
    decoder aborts on absolute ones) still point at the original ``iket.data.bin``.
    """
    data = json.loads(raw.read_bytes())
    decodable = [launch for launch in data.get("launches", []) if launch.get("canDecode")]
    if len(decodable) < 2 or data.get("graphLaunches"):
        return None
    parts = []
    for number, launch in enumerate(decodable):
        path = raw.with_name(f".part{number}.{raw.name}")
        path.write_text(json.dumps({**data, "launches": [launch]}))
        parts.append(path)
    return parts


def _split(text: bytes) -> tuple[bytes, bytes, dict]:
    """(head up to the launches, the launches' bytes, the parsed tail with the tables)."""
    start = text.index(_LAUNCHES) + len(_LAUNCHES)
    end = text.rindex(_TABLES)
    tail = json.loads(b"{" + text[end + 2 :])
    return text[:start], text[start:end], tail


def export_json(raw: Path, out: Path, decoder_class) -> bool:
    """Write the whole JSON export of ``raw`` to ``out`` by launches; False if unsplittable.

    Parts are decoded one after another (each launch alone is much cheaper than its share
    of the whole export) and spooled to temporary files, so at most one part is in memory.
    """
    parts = part_manifests(raw)
    if parts is None:
        return False
    spooled = [part.with_suffix(".out") for part in parts]
    try:
        for part, spool in zip(parts, spooled, strict=True):
            decoder = decoder_class(str(part))
            try:
                text = decoder.export_decoded_json()
            finally:
                decoder.close()
            with open(spool, "w", encoding="utf-8") as handle:
                write_slices(handle, text)
            del text
        with open(out, "wb") as handle:
            merge(spooled, handle)
    finally:
        for path in [*parts, *spooled]:
            path.unlink(missing_ok=True)
    return True


def write_slices(handle, text: str) -> None:
    """Write ``text`` to a text file in slices: the encoded copy never exceeds one slice."""
    for start in range(0, len(text), WRITE_SLICE):
        handle.write(text[start : start + WRITE_SLICE])


def merge(parts: list[Path], out) -> None:
    """Write the whole export, built from single-launch exports (in launch order), to ``out``."""
    strings: list = []
    locations: list = []
    string_at: dict = {}
    location_at: dict = {}
    tail: dict = {}
    for number, path in enumerate(parts):
        head, body, tail = _split(path.read_bytes())
        name_map = [_index(string_at, strings, s, s) for s in tail["stringTable"]]
        loc_map = [_index(location_at, locations, _key(loc), loc) for loc in tail["locationTable"]]
        out.write(head if number == 0 else b",")
        out.write(_remap(body, name_map, loc_map))
        del body
    rest = {key: value for key, value in tail.items() if key not in ("locationTable", "stringTable")}
    tables = {"locationTable": locations, **rest, "stringTable": strings}
    text = json.dumps(dict(sorted(tables.items())), separators=(",", ":"), ensure_ascii=False)
    out.write(b"]," + text[1:].encode("utf-8"))


def _key(location: dict) -> str:
    return json.dumps(location, sort_keys=True)


def _index(index: dict, table: list, key, value) -> int:
    if key not in index:
        index[key] = len(table)
        table.append(value)
    return index[key]


def _remap(body: bytes, names: list[int], locs: list[int]) -> bytes:
    """Rewrite the table indices of one part's launches in a single scan."""
    if names == list(range(len(names))) and locs == list(range(len(locs))):
        return body
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
