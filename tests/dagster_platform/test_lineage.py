"""The read model: what is new since event seq N, over a real store (no Dagster)."""

from __future__ import annotations

import datetime as dt

from baton.lineage import (
    CANDIDATES,
    CHECKPOINTS,
    OBSERVATIONS,
    VERIFIER_EVIDENCE,
    IdentityKind,
    changes_since,
    lapsed_leases,
)
from baton.ownership import Coordinator
from dagster_platform.platform_support import ResearchRun, newest_seq


def test_new_run_reports_every_asset_once_with_latest_versions(store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    delta = changes_since(store, blobs, 0)
    assert delta.new_runs == (run.run_id,)
    assert delta.high_water == newest_seq(store)
    by_asset = {v.asset: v for v in delta.versions}
    assert sorted(by_asset) == sorted([OBSERVATIONS, CANDIDATES, VERIFIER_EVIDENCE, CHECKPOINTS])
    assert len(delta.versions) == 4  # one per asset per run, however many checkpoints the window holds
    assert by_asset[CHECKPOINTS].data_version == run.head.checkpoint_hash
    assert by_asset[CANDIDATES].data_version == run.parts.current_candidate.artifact_hash
    evidence = by_asset[VERIFIER_EVIDENCE]
    assert evidence.input_versions == {CANDIDATES: run.parts.current_candidate.artifact_hash}
    assert evidence.metadata["result"] == "PASS" and evidence.metadata["bound_to_current_candidate"] is True
    assert by_asset[OBSERVATIONS].metadata["observations"] == 2
    assert by_asset[CHECKPOINTS].metadata["open_run"] == f"baton inspect {run.run_id}"


def test_unchanged_world_reports_nothing_and_keeps_the_mark(store, blobs):
    ResearchRun.launch(store, blobs).draft()
    mark = changes_since(store, blobs, 0).high_water
    again = changes_since(store, blobs, mark)
    assert again.high_water == mark
    assert not (again.versions or again.new_runs or again.identity_changes)


def test_only_changed_assets_after_the_mark(store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    mark = changes_since(store, blobs, 0).high_water
    first = run.parts.current_candidate.artifact_hash
    run.draft()
    delta = changes_since(store, blobs, mark)
    assert {v.asset for v in delta.versions} == {CANDIDATES, CHECKPOINTS}
    (candidate,) = delta.versions_of(CANDIDATES)
    assert candidate.parent_version == first and candidate.data_version != first
    (change,) = [c for c in delta.identity_changes if c.kind is IdentityKind.ARTIFACT]
    assert (change.before, change.after) == (first, candidate.data_version)
    assert change.evidence_was_bound is False  # the first draft was never verified


def test_artifact_change_after_verified_evidence_is_flagged(store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    mark = newest_seq(store)
    run.draft()
    (change,) = [c for c in changes_since(store, blobs, mark).identity_changes if c.kind is IdentityKind.ARTIFACT]
    assert change.evidence_was_bound is True


def test_window_limit_continues_from_the_mark(store, blobs):
    runs = [ResearchRun.launch(store, blobs) for _ in range(3)]
    seen: set[str] = set()
    mark, ticks = 0, 0
    while True:
        delta = changes_since(store, blobs, mark, window=3)
        if delta.high_water == mark:
            break
        seen |= {v.run_id for v in delta.versions}
        mark, ticks = delta.high_water, ticks + 1
    assert seen == {r.run_id for r in runs} and ticks > 3


def test_lapsed_leases_by_database_clock(store, blobs):
    held = ResearchRun.launch(store, blobs, lease_ttl_s=60.0)
    lost = ResearchRun.launch(store, blobs, lease_ttl_s=0.2)
    finished = ResearchRun.launch(store, blobs, lease_ttl_s=0.2)
    finished.finish()
    deadline = store.get_lease(lost.run_id).expires_at
    while store.db_now() <= deadline:
        pass  # the database clock decides, not ours
    lapsed = lapsed_leases(store)
    assert [lease.run_id for lease in lapsed] == [lost.run_id]
    assert lapsed[0].epoch == lost.epoch and lapsed[0].now >= deadline
    assert held.run_id not in {lease.run_id for lease in lapsed}
    # Once someone takes it again, it is no longer lapsed.
    assert Coordinator(store, name="t").grant(lost.run_id, "worker:other", ttl_s=60.0) is not None
    assert lapsed_leases(store) == []
    assert isinstance(lapsed[0].now, dt.datetime)
