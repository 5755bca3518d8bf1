"""A coding run handed off in the middle of its beam search resumes the same search.

Two coding runs work on identical repositories: one is handed off between
two workers mid-search (to a placement whose worker starts only after the
handoff, so the quiesced state can be read at rest), the other runs without
interruption. The oracles are outside the code under test: the checkpoints
read back with sqlite3 and json from the store's files, the patch model
provider's own call record, the git remote's records and plain git.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from baton.agents.coding_model import patch_model_dir
from baton.catalog.releases import RELEASES
from baton.checkpoints import restore
from baton.handoff.coordinator import HandoffCoordinator, HandoffRequest
from baton.models import AuthorityLevel, RunKind
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.worker import connect_git_remote, connect_targets
from baton.store.factory import open_blobs, open_store
from baton.targets.git_remote_service import PUSHES_FILE, repository_path
from baton.targets.service_process import target_data_dir

from builders.live import ended_run, wait_for

from .conftest import coding_stack, jsonl, plain_blob, plain_checkpoints

pytestmark = pytest.mark.integration
RUN, REFERENCE = "coding-moved-1", "coding-still-1"


def _spec(run_id: str, repository: str, placement: str) -> RunSpec:
    return RunSpec(run_id, RunKind.CODING, RELEASES["model-v7"], placement_named(DEFAULT_PLACEMENTS, placement),
                   "fix the failing tests", {"repository": repository, "branch": "main", "beam_width": 2,
                                             "proposals": 3, "max_depth": 3, "max_expansions": 8},
                   AuthorityLevel.EXTERNAL_MUTATE)


def _unscored(search: dict[str, Any]) -> list[str]:
    return [n["node_id"] for n in search["nodes"] if n["visits"] == 0 and n["pruned_reason"] is None
            and not n["cancelled"]]


def _touched(states: list[dict[str, Any]]) -> list[str]:
    """Which node each step after the first changed the visits of, in order."""
    order = []
    for before, after in zip(states, states[1:], strict=False):
        visits = {n["node_id"]: n["visits"] for n in before["nodes"]}
        order += [n["node_id"] for n in after["nodes"] if n["visits"] > visits.get(n["node_id"], 0)]
    return order


def test_a_handoff_mid_search_resumes_the_same_frontier_with_no_branch_lost_and_no_budget_reset(tmp_path: Path) -> None:
    home = tmp_path / "home"
    local, cloud = (placement_named(DEFAULT_PLACEMENTS, name) for name in ("local-gpu-eu", "cloud-eu"))
    with coding_stack(home, ["calc", "calc-ref"], **{"boundary-pause-s": "0.3"}) as stack:
        store = open_store(None, home)
        blobs = open_blobs(home, store)
        deploy, corpus = connect_targets(home, timeout_s=5.0)
        git = connect_git_remote(home, timeout_s=5.0)
        assert git is not None
        stack.start_worker("w1", local.name)
        launch_run(store, blobs, _spec(RUN, "calc", local.name), reservation_ttl_s=10.0)
        launch_run(store, blobs, _spec(REFERENCE, "calc-ref", local.name), reservation_ttl_s=10.0)

        def mid_search() -> bool:
            latest = store.latest_checkpoint(RUN)
            search = None if latest is None else restore(blobs, latest).parts.search
            return search is not None and search.expansions_used >= 2

        wait_for(mid_search, timeout_s=120, what="the search to expand two nodes on the first worker")
        coordinator = HandoffCoordinator(store, blobs, {local.name: local, cloud.name: cloud},
                                         fence_targets=(deploy, corpus, git), lease_ttl_s=30.0, quiesce_timeout_s=15.0)
        outcome = coordinator.handoff(HandoffRequest(RUN, "scheduler_rebalance", preferred_targets=(cloud.name,)))
        assert outcome.committed and outcome.target_placement == cloud.name, outcome

        # At rest between owners: the quiesced checkpoint, read without Baton.
        quiesced = plain_checkpoints(home, RUN)[-1]  # the source's last seal: nothing runs the run now
        source_epoch = quiesced["owner_epoch"]
        assert quiesced["boundary"] == "GENERATING"
        q_search = plain_blob(home, quiesced["search_state_ref"])
        q_budget = plain_blob(home, quiesced["budget_ledger_ref"])["used"]
        q_unscored, q_frontier = _unscored(q_search), list(q_search["frontier"])
        assert q_unscored or q_frontier, "the handoff must land in the middle of the search"
        calls_before = [c["node_id"] for c in jsonl(patch_model_dir(home) / "calls.jsonl") if c["run_id"] == RUN]
        assert calls_before == [n["node_id"] for n in q_search["nodes"] if n["visits"] == 2]

        stack.start_worker("w2", cloud.name)
        run, reference = ended_run(store, RUN, timeout_s=180), ended_run(store, REFERENCE, timeout_s=180)
        assert run.status == "verified", run.detail
        assert reference.status == "verified", reference.detail
        assert str(run.detail["finished_by"]).startswith("worker:w2")
        deploy.close(), corpus.close(), git.close()

    bodies = plain_checkpoints(home, RUN)
    final_body = bodies[-1]
    final = plain_blob(home, final_body["search_state_ref"])
    ref_final = plain_blob(home, plain_checkpoints(home, REFERENCE)[-1]["search_state_ref"])

    # No branch lost: every node of the quiesced search is in the final one, its past unchanged.
    by_id = {n["node_id"]: n for n in final["nodes"]}
    for node in q_search["nodes"]:
        now = by_id[node["node_id"]]
        assert (now["parent_id"], now["candidate_ref"]) == (node["parent_id"], node["candidate_ref"])
        assert now["visits"] >= node["visits"]
        if node["visits"] >= 1:
            assert (now["score"], now["verification"]) == (node["score"], node["verification"])
    assert final["expansions_used"] >= q_search["expansions_used"]

    # The same frontier: the new owner first scored what was waiting, then expanded the frontier in order.
    resumed = [plain_blob(home, b["search_state_ref"]) for b in bodies if b["owner_epoch"] > source_epoch]
    touched = _touched([q_search, *resumed])
    assert touched[: len(q_unscored)] == q_unscored
    expanded_after = [c["node_id"] for c in jsonl(patch_model_dir(home) / "calls.jsonl")
                      if c["run_id"] == RUN and c["epoch"] > source_epoch]
    assert expanded_after[: len(q_frontier)] == q_frontier

    # The provider's own record: each expanded node was asked for once, across both owners.
    calls = [c for c in jsonl(patch_model_dir(home) / "calls.jsonl") if c["run_id"] == RUN]
    assert [c["node_id"] for c in calls] == [n["node_id"] for n in final["nodes"] if n["visits"] == 2]
    assert len({c["node_id"] for c in calls}) == len(calls) == final["expansions_used"]
    assert {c["epoch"] for c in calls[: len(calls_before)]} == {source_epoch}

    # No budget reset: what the run used only grew, and it counts every billed call.
    used = plain_blob(home, final_body["budget_ledger_ref"])["used"]
    for name in ("model_calls", "search_expansions", "tool_calls", "sandbox_seconds"):
        assert float(used[name]) >= float(q_budget[name]), name
    assert used["model_calls"] == len(calls) and used["search_expansions"] == final["expansions_used"]
    conn = sqlite3.connect(f"file:{home / 'baton.db'}?mode=ro", uri=True)
    charges = [(epoch, json.loads(text)) for epoch, text in
               conn.execute("SELECT epoch, charge FROM budget_charges WHERE run_id = ? ORDER BY seq", (RUN,))]
    conn.close()
    assert sum(int(c.get("model_calls", 0)) for _, c in charges) == len(calls)  # the store's ledger = the bill
    assert {epoch for epoch, c in charges if c.get("search_expansions")} == {c["epoch"] for c in calls}

    # Node by node, the handed-off search is the one that never moved.
    assert final == ref_final

    # And the fix landed: plain git on the remote, and the remote's own record.
    bare = repository_path(target_data_dir("git", home), "calc")
    git_out = lambda *args: subprocess.run(["git", f"--git-dir={bare}", *args], capture_output=True, text=True,  # noqa: E731
                                           check=True).stdout.strip()
    (push,) = [p for p in jsonl(target_data_dir("git", home) / PUSHES_FILE) if p["run_id"] == RUN]
    assert git_out("rev-parse", "main") == push["outcome"]["commit"]
    assert git_out("rev-parse", "main^") == push["base_commit"]
    assert push["epoch"] > source_epoch
    store.close()
