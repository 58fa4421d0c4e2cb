"""The report's data helpers, against a plain recount."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from iket_cli.render import report_data


@pytest.mark.parametrize(
    "values",
    [
        [random.Random(1).randrange(50) for _ in range(5000)],  # dense: counted by bincount
        [random.Random(2).choice([-1, 3, 7]) for _ in range(300)],  # a record of no warp (-1)
        [1 << 40, 5, 5, 1 << 40, 9],  # sparse
        [],
    ],
    ids=["dense", "negative", "sparse", "empty"],
)
def test_records_per_location_are_a_plain_count(values):
    assert report_data._counts(values) == dict(Counter(values))
