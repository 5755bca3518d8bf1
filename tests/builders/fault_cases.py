"""Checks the live fault-case tests share."""

from __future__ import annotations

import json
from pathlib import Path

from baton.faults.cases import CASES
from baton.faults.matrix import run_case


def assert_passed_over_and_clean(case: str, tmp_path: Path, *, stays_on: str = "local-gpu-eu") -> None:
    """Run `case` for Baton with every protection on: no oracle says yes, the move to the forbidden placement is
    aborted or committed elsewhere, and the deploy service saw capabilities only from `stays_on`."""
    result = run_case(CASES[case], "baton", 0, tmp_path)
    assert result.error is None, result.error
    assert result.violated == [], {q.value: result.answers[q] for q in result.violated}
    moved = next(note for note in result.notes if note.startswith("handoff to "))
    assert moved.endswith("aborted") or moved.endswith(" instead"), result.notes
    presented = tmp_path / f"{case}-baton" / "home" / "targets" / "deploy" / "presented.jsonl"
    text = presented.read_text() if presented.exists() else ""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert {line["placement"] for line in lines} <= {stays_on}, lines
