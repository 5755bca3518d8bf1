"""docs/spec-map.md names a row for each section of the spec, and only paths and fault cases that exist."""

from __future__ import annotations

import re
from pathlib import Path

from baton.faults.cases import CASES

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "spec-map.md"
SECTIONS = [str(n) for n in range(1, 31)] + ["next"]


def rows() -> dict[str, str]:
    """Section key (first cell) -> the whole table row."""
    found: dict[str, str] = {}
    for line in MAP.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 6 and cells[0] in SECTIONS:
            assert cells[0] not in found, f"section {cells[0]} has two rows"
            assert all(cells[1:]), f"section {cells[0]} has an empty cell (write — for nothing)"
            found[cells[0]] = line
    return found


def named_paths(text: str) -> set[str]:
    return {token for token in re.findall(r"`([^`\s]+)`", text) if "/" in token}


def test_every_section_has_one_row_with_modules_and_tests() -> None:
    found = rows()
    assert sorted(found, key=SECTIONS.index) == SECTIONS
    for section, line in found.items():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert named_paths(cells[2]), f"section {section} names no module"
        assert any(p.startswith("tests/") for p in named_paths(cells[3])), f"section {section} names no test"


def test_every_named_path_exists() -> None:
    named = set().union(*(named_paths(line) for line in rows().values()))
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"docs/spec-map.md names paths that do not exist: {missing}"


def test_every_named_fault_case_is_in_the_matrix() -> None:
    named = set(re.findall(r"`case:([a-z0-9-]+)`", MAP.read_text()))
    assert named, "the map names no fault case"
    assert not named - set(CASES), f"unknown fault cases: {sorted(named - set(CASES))}"


def test_the_check_catches_a_path_that_does_not_exist() -> None:
    # the same extraction the map check uses, on a row naming a missing module
    row = "| 1 | x | `baton/no_such_module.py` | `tests/unit/test_models.py` | — | — |"
    assert [p for p in named_paths(row) if not (ROOT / p).exists()] == ["baton/no_such_module.py"]
