"""Finding and rewriting a JSON export's table indices, against a regular expression's rewrite."""

import random
import re

from iket_cli.decode.split.json import indices


def random_body(rng: random.Random, names: list[int], locs: list[int]) -> bytes:
    """Records in the export's layout whose indices point into tables of these sizes."""
    records = []
    for _ in range(rng.randint(0, 120)):
        pick = rng.random()
        if pick < 0.3:
            records.append(b'{"rangeNameIdx":%d,"rangeType":2}' % rng.randrange(len(names)))
        elif pick < 0.5:
            records.append(
                b'{"locIdx":%d,"markerNameIdx":%d}' % (rng.randrange(len(locs)), rng.randrange(len(names)))
            )
        elif pick < 0.8:
            entries = b",".join(b"%d" % rng.randrange(len(locs)) for _ in range(rng.randint(0, 3)))
            records.append(b'{"startTs":1796,"warpLocIdxs":[' + entries + b"]}")
        else:
            records.append(b'{"gridId":12,"kernelName":"k_Idx","maxIdx":"x"}')
    return b",".join(records)


def test_the_vectorised_remap_equals_the_one_match_at_a_time_rewrite():
    """Random bodies, random table maps (numbers that keep, gain or lose digits): the numpy
    rewrite gives the regular expression's bytes exactly."""
    for body, names, locs in random_cases(22):
        assert indices.remapped(body, names, locs) == remap_slowly(body, names, locs)


def random_cases(seed: int, count: int = 200):
    """(body, names map, locations map): random tables whose new numbers keep, gain or lose
    digits."""
    rng = random.Random(seed)
    for _ in range(count):
        n, m = rng.randint(1, 30), rng.randint(1, 300)
        names = rng.sample(range(n * rng.randint(1, 40)), n)
        locs = rng.sample(range(m * rng.randint(1, 40)), m)
        yield random_body(rng, list(range(n)), list(range(m))), names, locs


def test_indices_kept_by_the_worker_give_the_same_rewrite(tmp_path):
    """What a part's worker finds and keeps (save, load) rewrites as a fresh scan does."""
    rng = random.Random(7)
    for round_ in range(50):
        names, locs = rng.sample(range(500), 20), rng.sample(range(5000), 200)
        body = random_body(rng, names, locs)
        kept = tmp_path / f"{round_}.idx"
        indices.save(indices.find(body), kept)
        loaded = indices.load(kept)
        assert len(loaded) == count_slowly(body)
        assert indices.remapped(body, names, locs, loaded) == remap_slowly(body, names, locs)


#: The rewrite the merge did before it was numpy's: one regular-expression match at a time.
_INDEX = re.compile(rb'"(rangeNameIdx|markerNameIdx|locIdx)":(\d+)|"warpLocIdxs":\[([\d,]*)\]')


def remap_slowly(body: bytes, names: list[int], locs: list[int]) -> bytes:
    """The reference :func:`indices.remapped` is held to."""
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


def count_slowly(body: bytes) -> int:
    """How many index numbers ``body`` holds, by the reference's pattern."""
    return sum(1 if m[1] else len([i for i in m[3].split(b",") if i]) for m in _INDEX.finditer(body))


def test_the_splice_gives_the_rewrite_and_where_each_number_went():
    """:func:`indices.spliced` (a split launch's chunks: numbers that gain or lose digits,
    all placed at once) gives the regular expression's bytes, and each new number sits where
    it says."""
    import numpy as np

    for body, names, locs in random_cases(3):
        found = indices.find(body)
        order = np.argsort(found.start, kind="stable")
        found = found.taken(order)
        new = indices.looked_up(found, names, locs)
        out, starts = indices.spliced(np.frombuffer(body, np.uint8), found, new)
        assert out.tobytes() == remap_slowly(body, names, locs)
        assert [
            int(out[s : s + len(b"%d" % v)].tobytes()) for s, v in zip(starts, new, strict=True)
        ] == new.tolist()
