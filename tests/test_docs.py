"""The README is a tour that points at the rest, and what it and docs/ say of the code holds.

Each check here fails on a real drift: a README grown past a tour, a link to a moved
section that no longer resolves, a layout table that lists a folder the package lacks (or
misses one it has), an exit code added to ``errors.ExitCode`` but not documented.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iket_cli.errors import ExitCode

from conftest import ROOT

README = ROOT / "README.md"
#: The guides the README's tour links to (the command reference, moved out of the README).
GUIDES = ["capture.md", "reading.md", "ci.md", "cute.md", "faults.md", "development.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    fence = False
    found = set()
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^#+ (.*)", line)):
            found.add(slug(m.group(1)))
    return found


def test_the_readme_is_a_tour_of_at_most_250_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move reference text to docs/"
    headings = [line for line in lines if line.startswith("## ")]
    for needed in ("## Set-up", "## A first capture", "## In CI", "## Where to go next"):
        assert any(h.startswith(needed) for h in headings), needed


@pytest.mark.parametrize("page", [README] + [ROOT / "docs" / g for g in GUIDES], ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(page: Path):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https://..., mailto:
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: link to {target} resolves to nothing"
        if anchor:
            assert anchor in anchors(resolved), f"{page.name}: no heading for #{anchor} in {resolved.name}"


def test_every_guide_is_reachable_from_the_readme():
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall(README.read_text())}
    assert set(GUIDES) <= linked, f"not linked from the README: {set(GUIDES) - linked}"


def test_the_layout_table_lists_exactly_the_packages_folders():
    table = README.read_text().split("## How the code is laid out", 1)[1]
    listed = set(re.findall(r"^\| `(\w+)/` \|", table, flags=re.M))
    folders = {p.name for p in (ROOT / "iket_cli").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert listed == folders, f"README layout table {sorted(listed)} against folders {sorted(folders)}"
    rule = re.search(r"^    (model ←.*)$", table, flags=re.M).group(1)
    assert set(re.findall(r"\w+", rule)) == folders, "the layer rule names every folder"


def test_the_exit_code_table_is_errors_exit_codes():
    text = (ROOT / "docs" / "faults.md").read_text()
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", text, flags=re.M)}
    assert documented == {int(code) for code in ExitCode}
    assert "docs/faults.md" in (ROOT / "iket_cli" / "errors.py").read_text()


def test_the_readmes_configuration_is_one_iket_run_accepts(tmp_path):
    """The README's ``iket.toml`` goes through the real configuration reader."""
    from iket_cli.pipeline import config

    snippet = re.search(r"```toml\n(.*?)```", README.read_text(), flags=re.S).group(1)
    (tmp_path / "iket.toml").write_text(snippet)
    loaded = config.load(tmp_path / "iket.toml")
    assert [job.name for job in loaded.jobs] == ["affine"]
