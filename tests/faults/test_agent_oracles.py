"""The coding and browser oracles say yes on records that show the fault and no on records that do not.

`untested_push` is run against a real bare repository: a commit whose tests pass
and one whose tests fail (made with plain git through the seed helpers, the
oracle then clones and runs pytest itself). `wrong_submission` reads crafted
application records. The shared oracles now count pushes and submissions too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.faults.oracles import Question, answer
from baton.faults.oracles_agents import answer_agents, patch_model_budget, untested_push, wrong_submission
from baton.targets.git_remote_repo import SEED_PROJECT, commit_file, create_seed_repository

RUN = "agent-case-1"
FIXED_STATS = SEED_PROJECT["calc/stats.py"].replace("(len(values) - 1)", "len(values)").replace(
    "    if value > high:\n        return low\n", "    if value > high:\n        return high\n")
ANSWERS = {"company": "Acme", "seats": "12"}


def _lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _reported(root: Path, status: str = "verified") -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "reported.json").write_text(json.dumps({"run_id": RUN, "status": status}))


def _pushed(root: Path, commit: str, seq: int = 1) -> dict[str, Any]:
    return {"seq": seq, "run_id": RUN, "idempotency_key": f"k{seq}", "operation_id": f"op{seq}", "epoch": 1,
            "repository": "calc", "branch": "main", "outcome": {"commit": commit}}


def _repository(root: Path) -> Path:
    bare = root / "home" / "targets" / "git" / "repos" / "calc.git"
    create_seed_repository(bare)
    return bare


def test_a_pushed_tree_whose_tests_pass_is_not_flagged(tmp_path: Path) -> None:
    _reported(tmp_path)
    bare = _repository(tmp_path)
    fixed = commit_file(bare, "main", "calc/stats.py", FIXED_STATS, "fix")
    _lines(tmp_path / "home" / "targets" / "git" / "pushes.jsonl", [_pushed(tmp_path, fixed)])
    assert untested_push(tmp_path) == []


def test_a_pushed_tree_whose_tests_fail_is_flagged_by_the_oracles_own_pytest(tmp_path: Path) -> None:
    _reported(tmp_path)
    bare = _repository(tmp_path)
    commit_file(bare, "main", "calc/stats.py", FIXED_STATS, "fix")
    broken = commit_file(bare, "main", "tests/test_upstream.py",
                         "from calc.stats import mean\n\n\ndef test_empty():\n    assert mean([]) == 0\n", "upstream")
    _lines(tmp_path / "home" / "targets" / "git" / "pushes.jsonl", [_pushed(tmp_path, broken)])
    (evidence,) = untested_push(tmp_path)
    assert broken[:12] in evidence and "failed" in evidence


def test_another_runs_push_is_not_this_runs(tmp_path: Path) -> None:
    _reported(tmp_path)
    bare = _repository(tmp_path)
    broken = commit_file(bare, "main", "calc/__init__.py", "raise SystemExit(3)\n", "break")
    _lines(tmp_path / "home" / "targets" / "git" / "pushes.jsonl", [_pushed(tmp_path, broken) | {"run_id": "other"}])
    assert untested_push(tmp_path) == []


def _webapp(root: Path, *, submitted_version: int, person_edit: bool) -> None:
    _reported(root)
    (root / "intent.json").write_text(json.dumps({"kind": "browser", "task": {"account": "acme", "answers": ANSWERS}}))
    app = root / "home" / "targets" / "webapp"
    versions = [{"draft_id": "d_1", "account": "acme", "version": 1, "answers": ANSWERS,
                 "writer": {"run_id": RUN, "epoch": 1}}]
    if person_edit:
        versions.append({"draft_id": "d_1", "account": "acme", "version": 2, "answers": {**ANSWERS, "seats": "99"},
                         "writer": {"user": "alice"}})
    _lines(app / "drafts.jsonl", versions)
    _lines(app / "submissions.jsonl", [{"seq": 1, "run_id": RUN, "idempotency_key": "k", "draft_id": "d_1",
                                        "version": submitted_version}])


def test_the_owners_answers_submitted_is_not_flagged(tmp_path: Path) -> None:
    _webapp(tmp_path, submitted_version=1, person_edit=True)
    assert wrong_submission(tmp_path) == []


def test_a_person_edited_version_submitted_by_the_run_is_flagged_twice(tmp_path: Path) -> None:
    _webapp(tmp_path, submitted_version=2, person_edit=True)
    evidence = wrong_submission(tmp_path)
    assert len(evidence) == 2 and "['seats']" in evidence[0] and "alice" in evidence[1]


def test_a_submission_of_a_version_the_app_never_held_is_flagged(tmp_path: Path) -> None:
    _webapp(tmp_path, submitted_version=7, person_edit=False)
    (evidence,) = wrong_submission(tmp_path)
    assert "does not hold" in evidence


def test_no_intent_no_agent_answer(tmp_path: Path) -> None:
    _reported(tmp_path)
    assert answer_agents(tmp_path) == {"untested_push": [], "wrong_submission": [], "budget": []}


def test_patch_model_calls_beyond_the_runs_account_are_a_budget_finding(tmp_path: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "reported.json").write_text(json.dumps({"run_id": RUN, "model_calls": 2, "model_spend_usd": "0.02"}))
    calls = tmp_path / "home" / "providers" / "patch-model" / "calls.jsonl"
    _lines(calls, [{"run_id": RUN, "cost_usd": "0.01"}] * 2 + [{"run_id": "other", "cost_usd": "5"}])
    assert patch_model_budget(tmp_path) == []
    _lines(calls, [{"run_id": RUN, "cost_usd": "0.01"}] * 3)
    (evidence,) = patch_model_budget(tmp_path)
    assert "recorded 3 call(s)" in evidence


def test_the_shared_oracles_count_pushes_and_submissions(tmp_path: Path) -> None:
    _webapp(tmp_path, submitted_version=1, person_edit=False)
    app = tmp_path / "home" / "targets" / "webapp"
    row = {"seq": 1, "run_id": RUN, "idempotency_key": "k", "draft_id": "d_1", "version": 1}
    _lines(app / "submissions.jsonl", [row, {**row, "seq": 2, "idempotency_key": "k2"}])
    found = answer(tmp_path)
    assert found[Question.DUPLICATE] and "webapp recorded 2 effects" in found[Question.DUPLICATE][0]
    _reported(tmp_path, status="failed")
    assert answer(tmp_path)[Question.UNKNOWN_HIDDEN]
