"""docs/fault-matrix.md is generated from runs: its sections are replaced in place, each names its command."""

from __future__ import annotations

from pathlib import Path

from baton.faults.ablations import ABLATIONS
from baton.faults.doc import replace_section

DOC = Path(__file__).resolve().parents[2] / "docs" / "fault-matrix.md"


def test_a_section_is_replaced_in_place_and_others_are_kept() -> None:
    text = replace_section("# T\n", "a", "one")
    text = replace_section(text, "b", "two")
    text = replace_section(text, "a", "three")
    assert text.count("section:a -->") == 2 and "three" in text and "one" not in text and "two" in text


def test_the_doc_has_both_backends_and_every_ablation_with_their_commands() -> None:
    text = DOC.read_text(encoding="utf-8")
    for section in ("cases", "matrix-sqlite", "matrix-postgresql", "ablations"):
        assert f"<!-- section:{section} -->" in text, section
    assert text.count("Command: `baton faults") >= 3
    for name in ABLATIONS:
        assert f"| `{name}` |" in text, f"{name} is missing from the ablation table"
