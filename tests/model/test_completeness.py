"""The completeness record's shape, headline and check (model/completeness.py)."""

import pytest

from iket_cli.model import completeness
from iket_cli.model.completeness import BUDGET, RECORDS, Completeness, Loss


def _loss(**changes) -> Loss:
    base = dict(
        kernel="stage_kernel",
        cause=BUDGET,
        lost=RECORDS,
        launches=3,
        message="3 launches of stage_kernel recorded nothing",
        fix=completeness.fix_for(BUDGET, 16),
        source="budget",
        short="stage_kernel",
        pid_hex="0x2a",
        records=72,
        needed=16,
        budget=3,
    )
    return Loss(**{**base, **changes})


def test_complete_is_true_false_or_unknown():
    assert Completeness(checked=["decode"]).complete is True
    assert Completeness(checked=["decode"], losses=[_loss()]).complete is False
    assert Completeness().complete is None, "nothing checked: nothing claimed"


def test_a_record_round_trips_through_its_check():
    record = Completeness(losses=[_loss()], checked=["decode", "budget"]).to_dict()
    assert completeness.validate(record) == []
    assert completeness.validate(Completeness(checked=["decode"]).to_dict()) == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"complete": "no"}, "complete"),
        ({"complete": True}, "disagrees"),
        ({"losses": [{"kernel": 1}]}, "losses[0]"),
        ({"losses": "x"}, "losses[0]"),
        ({"checked": [3]}, "checked"),
        ({"unchecked": [{"source": 1}]}, "unchecked"),
    ],
)
def test_a_damaged_record_is_refused_by_name(change, error):
    record = {**Completeness(losses=[_loss()], checked=["decode"]).to_dict(), **change}
    found = completeness.validate(record)
    assert found and error in found[0], found


def test_the_fix_names_the_budget_needed():
    assert completeness.fix_for(BUDGET, 16).endswith("--max-ts-cnt-per-warp 16")
    assert "a larger value" in completeness.fix_for(BUDGET)


def test_the_headline_says_the_first_loss_its_fix_and_how_many_more():
    record = {
        "completeness": Completeness(losses=[_loss(), _loss(kernel="k2")], checked=["decode"]).to_dict()
    }
    line = completeness.headline(record)
    assert line.startswith(
        "INCOMPLETE: 3 launches of stage_kernel recorded nothing; drop --max-ts-cnt-per-warp"
    )
    assert "and 1 more loss(es)" in line
    assert completeness.headline({"completeness": Completeness(checked=["decode"]).to_dict()}) is None
    assert completeness.headline({}) is None


def test_a_process_sees_its_own_losses_and_those_of_no_process():
    record = {
        "completeness": Completeness(
            losses=[_loss(), _loss(pid_hex="0x2b"), _loss(pid_hex=None, kernel="")], checked=["decode"]
        ).to_dict()
    }
    assert [loss["pid_hex"] for loss in completeness.of_process(record, "0x2a")] == ["0x2a", None]
    assert completeness.of_process({}, "0x2a") is None
