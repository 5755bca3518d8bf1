"""The beam's rules, the patch format, the scripted patch model and bad input: pure functions, no processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from baton.agents.coding_agent import CodingTask
from baton.agents.coding_model import PatchModelProvider, ScriptedPatchModel, read_calls
from baton.agents.coding_search import EXHAUSTED, ROOT, SOLVED, BeamBook, BeamConfig
from baton.agents.coding_workspace import PatchFormatError, make_patch, parse_patch
from baton.models import AuthorityLevel, RunKind, SearchState
from baton.placements import DEFAULT_PLACEMENTS
from baton.runtime.fleet_plan import plan_runs, worker_placements
from baton.targets.git_remote_repo import SEED_PROJECT
from baton.targets.git_remote_service import create_app

BASE = "a" * 40
TESTS = {"passed": 2, "failed": 3, "errors": 0}


def _score(book: BeamBook, node: str, passed: int, total: int = 5) -> None:
    book.record_score(node, passed=passed, failed=total - passed, errors=0, failing=["tests/t.py::test_x"],
                      all_passed=passed == total, output_ref="sha256:" + "0" * 64)


def _expand(book: BeamBook, node: str, diffs: list[str | None]) -> list[str]:
    return book.record_expansion(node, [({"description": f"edit {i}"}, d) for i, d in enumerate(diffs)],
                                 proposed_by="scripted-model-v7", base_commit=BASE)


def test_a_level_keeps_the_best_width_children_and_prunes_the_rest_with_their_rank() -> None:
    book = BeamBook.start(BeamConfig(width=2, proposals=4, max_depth=3, max_expansions=8), BASE)
    assert book.next_action() == ("score", ROOT)
    _score(book, ROOT, 2)
    assert book.next_action() == ("expand", ROOT) and book.state.frontier == (ROOT,)
    children = _expand(book, ROOT, ["d1", "d2", "d1", None])
    assert children == ["n1", "n2", "n3", "n4"]
    assert book.node("n3").pruned_reason == "same patch as n1"
    assert book.node("n4").pruned_reason == "edit does not apply: edit 3" and book.node("n4").candidate_ref is None
    assert book.node(ROOT).visits == 2 and book.state.expansions_used == 1 and book.state.frontier == ()
    assert book.next_action() == ("score", "n1")
    _score(book, "n1", 3)
    _score(book, "n2", 4)
    assert book.next_action() == ("select", None)
    book.select()
    assert book.state.frontier == ("n2", "n1") and book.meta["level"] == 1
    # Round trip through what the checkpoint carries: nothing of the search is lost.
    again = BeamBook(SearchState.model_validate(book.state.model_dump()), book.info())
    assert again.state == book.state and again.info() == book.info() and again.next_action() == ("expand", "n2")


def test_the_search_stops_at_the_best_passing_child_and_prunes_its_siblings() -> None:
    book = BeamBook.start(BeamConfig(width=1, proposals=2), BASE)
    _score(book, ROOT, 2)
    _expand(book, ROOT, ["long diff", "d"])
    _score(book, "n1", 5)
    _score(book, "n2", 5)
    book.select()
    assert (book.status, book.solution) == (SOLVED, "n2")  # equal scores: the shorter patch wins
    assert book.node("n1").pruned_reason == "not chosen: n2 passes every test"
    assert book.next_action() == ("done", None)


def test_running_out_of_expansions_cancels_the_frontier_instead_of_dropping_it() -> None:
    book = BeamBook.start(BeamConfig(width=2, proposals=2, max_expansions=1), BASE)
    _score(book, ROOT, 2)
    _expand(book, ROOT, ["d1", "d2"])
    book.cancel("search budget spent: 1 expansions")
    assert book.status == EXHAUSTED and book.state.cancelled
    assert [n.node_id for n in book.state.nodes if n.cancelled] == ["n1", "n2"]
    assert {n.node_id for n in book.state.nodes} == {ROOT, "n1", "n2"}


def test_a_root_that_already_passes_is_nothing_to_fix() -> None:
    book = BeamBook.start(BeamConfig(), BASE)
    _score(book, ROOT, 5)
    assert book.status == EXHAUSTED and "already passes" in str(book.meta["reason"])


@pytest.mark.parametrize("task, message", [
    ({"beam_width": 0}, "beam width must be at least 1"),
    ({"proposals": "many"}, "invalid beam settings"),
])
def test_bad_beam_settings_are_refused_with_a_clear_error(task: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CodingTask(task)


def test_the_patch_names_its_base_and_anything_else_is_refused() -> None:
    patch = make_patch(BASE, b"diff --git a/x b/x\n")
    assert parse_patch(patch) == (BASE, b"diff --git a/x b/x\n")
    for bad in (b"diff --git a/x b/x\n", b"baton-patch: 1\nbase-commit: nope\n\ndiff", b""):
        with pytest.raises(PatchFormatError):
            parse_patch(bad)


def test_the_scripted_patch_model_is_deterministic_and_the_releases_differ(tmp_path: Path) -> None:
    files = {k: v for k, v in SEED_PROJECT.items() if k.endswith(".py")}
    failing = ["tests/test_stats.py::test_clamp_high"]
    v7, v8 = ScriptedPatchModel("model-v7"), ScriptedPatchModel("model-v8")
    first, second = v7.propose(files, failing, k=3), v7.propose(files, failing, k=3)
    assert first.reply.output == second.reply.output and first.reply.charge == second.reply.charge
    assert [e.description for e in first.edits] != [e.description for e in v8.propose(files, failing, k=3).edits]
    assert any("return high instead of low" in e.description for e in first.edits)
    provider = PatchModelProvider(tmp_path / "provider")
    provider.propose("model-v7", files, failing, k=3, run_id="r1", epoch=2, node_id="n0")
    (call,) = read_calls(tmp_path / "provider", "r1")
    assert (call["node_id"], call["epoch"], call["model"]) == ("n0", 2, "model-v7")
    assert call["input_tokens"] == first.reply.input_tokens


def test_the_remote_refuses_malformed_pushes_and_unknown_repositories(tmp_path: Path) -> None:
    client = TestClient(create_app(tmp_path / "git", repositories=("calc",)))
    assert client.get("/repositories/nope").json()["error"] == "unknown_repository"
    assert client.post("/admin/repositories", json={"name": "../escape"}).status_code == 422
    headers = {"X-Operation-Id": "op", "Idempotency-Key": "k", "X-Fencing-Run": "r", "X-Fencing-Epoch": "1"}
    body = {"repository": "calc", "branch": "main", "base_commit": BASE, "patch": "p",
            "patch_hash": "sha256:" + "0" * 64, "message": "m"}
    assert client.post("/pushes", json={**body, "extra": 1}, headers=headers).status_code == 422
    assert client.post("/pushes", json=body, headers={}).json()["error"] == "bad_headers"
    assert client.post("/pushes", json={**body, "repository": "other"}, headers=headers).json()["error"] in (
        "patch_hash_mismatch", "unknown_repository")
    assert client.get("/pushes").json() == []


def test_the_fleet_plans_coding_runs_only_where_external_mutation_is_allowed() -> None:
    catalog = {p.name: p for p in DEFAULT_PLACEMENTS}
    hosting = [catalog[name] for name in dict.fromkeys(worker_placements(DEFAULT_PLACEMENTS, 4))]
    specs = plan_runs(16, hosting, prefix="f")
    coding = [s for s in specs if s.kind is RunKind.CODING]
    assert len(coding) == 4 and {s.kind for s in specs} == {RunKind.RESEARCH, RunKind.DEPLOY, RunKind.CODING}
    for spec in coding:
        assert spec.placement.authority_ceiling.allows(AuthorityLevel.EXTERNAL_MUTATE)
        assert spec.task_input["repository"] == f"calc-{spec.run_id}"
    assert len({s.task_input["repository"] for s in coding}) == 4
