"""What run-iket's session can do: by release, and as a machine's environment says otherwise."""

from __future__ import annotations

import pytest

from iket_cli.errors import ExitCode, UsageError
from iket_cli.model import runiket_facts
from iket_cli.model.runiket_facts import KEPT, PER_WINDOW, facts_for, overridden

from conftest import run_iket


def test_4_8_keeps_one_handle_for_any_number_of_windows():
    facts = facts_for("4.8.1")
    assert (facts.design, facts.windows_per_process, facts.safe_max_ts) == (KEPT, None, 256)
    assert not facts.more_windows_risky()
    assert facts_for("9.0") is runiket_facts.LATEST and facts_for(None) is runiket_facts.LATEST


def test_a_machine_says_one_window_and_the_old_design():
    facts = overridden(
        facts_for("4.8.1"), {"IKET_CLI_SESSION_WINDOWS": "1", "IKET_CLI_SESSION_DESIGN": PER_WINDOW}
    )
    assert (facts.windows_per_process, facts.design) == (1, PER_WINDOW) and facts.more_windows_risky()
    assert overridden(facts, {"IKET_CLI_SESSION_WINDOWS": "any"}).windows_per_process is None


@pytest.mark.parametrize(
    "env", [{"IKET_CLI_SESSION_WINDOWS": "0"}, {"IKET_CLI_SESSION_WINDOWS": "２"},
            {"IKET_CLI_SESSION_WINDOWS": "-1"}, {"IKET_CLI_SESSION_DESIGN": "fresh"}]
)  # fmt: skip
def test_a_bad_value_is_one_usage_error(env):
    with pytest.raises(UsageError) as said:
        overridden(facts_for("4.8.1"), env)
    assert said.value.exit_code == ExitCode.USAGE and said.value.hint


def test_the_cli_says_a_bad_value_in_one_line(tmp_path):
    (tmp_path / "steps.py").write_text("def step():\n    pass\n")
    (tmp_path / "work.py").write_text("import steps\nsteps.step()\n")
    env = {"IKET_CLI_SESSION_WINDOWS": "many"}
    result = run_iket("profile", "work.py", "--window", "steps:step", "-o", "out", cwd=tmp_path, env=env)
    assert result.code == 2, result
    assert "IKET_CLI_SESSION_WINDOWS='many' is not a number of windows" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_other_module_states_a_run_iket_release():
    """A new run-iket release is one entry in runiket_facts, not an edit across the package."""
    import re
    from pathlib import Path

    package = Path(runiket_facts.__file__).resolve().parent.parent
    stated = [
        f"{path.relative_to(package)}:{n}"
        for path in package.rglob("*.py")
        if path.name != "runiket_facts.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"(?<![\d.])4\.\d+(\.\d+)?(?![\d.])", line)
        and re.search(r"run-iket|IKET|libs-base", line)
    ]
    assert stated == []
