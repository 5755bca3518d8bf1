"""`baton faults`: the matrix, its JSON, and its exit codes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import baton.faults.questions as questions
import baton.handoff.resume as resume
from baton.cli import app

runner = CliRunner()


def test_json_matrix_for_chosen_cases() -> None:
    result = runner.invoke(app, ["faults", "--json", "--seed", "5", "--case", "approval-expired",
                                 "--case", "old-worker-resumes"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["ok"] is True and data["seed"] == 5 and data["baton_violations"] == 0
    assert [c["case_id"] for c in data["cases"]] == ["approval-expired", "old-worker-resumes"]
    assert set(data["questions"]) == {q.value for q in questions.Question}
    approval = data["cases"][0]
    assert not any(approval["baton"]["answers"].values())
    assert approval["naive"]["answers"]["authority_expanded"] is True
    assert approval["naive"]["evidence"]["authority_expanded"]


def test_table_output() -> None:
    result = runner.invoke(app, ["faults", "--case", "side-effect-timed-out"])
    assert result.exit_code == 0, result.output
    assert "external side effect timed out" in result.output and "0 violation(s)" in result.output


def test_any_baton_violation_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resume, "_at_least", lambda sealed, charged: sealed)
    result = runner.invoke(app, ["faults", "--case", "source-dies-before-seal"])
    assert result.exit_code == 1, result.output
    assert "budget_reset" in result.output


def test_blind_checks_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(questions, "QUESTIONS", {q: (lambda seen: []) for q in questions.Question})
    result = runner.invoke(app, ["faults", "--case", "old-worker-resumes"])
    assert result.exit_code == 2, result.output
    assert "checks cannot fail" in result.output


def test_unknown_case_is_refused() -> None:
    assert runner.invoke(app, ["faults", "--case", "no-such-case"]).exit_code == 2
