"""Asset-check audits, re-verification, freshness and sensor decisions over a real store (no Dagster).

Each audit has a test that breaks a run and sees it fail; each sensor decision
raises exactly the expected jobs for a change and none when asked again from
the returned cursor.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from baton.models import Boundary, BudgetUsage, EventType
from baton.platform.freshness import runs_due_for_reverification
from baton.platform.reverify import reverify_run
from baton.platform.run_audit import budget_monotonic, checkpoint_integrity, evidence_bound
from baton.platform.sensor_decisions import (
    ARTIFACT_CHANGED,
    HANDOFF_JOB,
    LEASE_EXPIRED,
    REVERIFICATION_JOB,
    artifact_changes,
    discover_runs,
    lease_expiries,
)

from .platform_support import ResearchRun, newest_seq


def test_evidence_binding_breaks_on_a_new_candidate_and_reverification_restores_it(store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    assert evidence_bound(store, blobs, run.run_id).passed
    run.draft()  # a new artifact: the held evidence verified the old one
    broken = evidence_bound(store, blobs, run.run_id)
    assert not broken.passed and "not the current candidate" in broken.description
    done = reverify_run(store, blobs, run.run_id)
    assert done.evidence.candidate_hash == run.parts.current_candidate.artifact_hash
    assert done.evidence.passed
    assert evidence_bound(store, blobs, run.run_id).passed
    (_, event), = store.list_events(run_id=run.run_id, event_types=[EventType.EVIDENCE_RECORDED])
    assert event.detail["evidence_ref"] == done.evidence_ref and event.detail["result"] == "PASS"


def test_integrity_fails_when_a_referenced_blob_is_corrupted(store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    assert checkpoint_integrity(store, blobs, run.run_id).passed
    path = blobs._path(run.observations[0].content_ref)
    path.chmod(0o644)
    path.write_bytes(b"tampered")
    audit = checkpoint_integrity(store, blobs, run.run_id)
    assert not audit.passed


def test_budget_audit_fails_when_usage_goes_down(store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    assert budget_monotonic(store, blobs, run.run_id).passed
    lower = run.parts.budget.model_copy(update={"used": BudgetUsage(model_spend_usd=Decimal("0"))})
    run.seal(Boundary.GENERATING, parts=dataclasses.replace(run.parts, budget=lower))
    audit = budget_monotonic(store, blobs, run.run_id)
    assert not audit.passed and "used less" in audit.description


def test_freshness_lapse_makes_a_run_due_and_reverification_settles_it(store, blobs):
    run = ResearchRun.launch(store, blobs, freshness_s=0.3)
    run.draft()
    run.verify()
    deadline = run.observations[0].expires_at
    while store.db_now() <= deadline:
        pass
    (due,) = runs_due_for_reverification(store, blobs)
    assert due.run_id == run.run_id and "lapsed" in due.reason
    again = reverify_run(store, blobs, run.run_id)
    assert not again.evidence.passed  # a lapsed observation can no longer be cited
    assert runs_due_for_reverification(store, blobs) == []


def test_artifact_change_raises_one_reverification_then_none(store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    cursor = newest_seq(store)
    run.draft()
    first = artifact_changes(store, blobs, cursor)
    (request,) = first.requests
    assert (request.job_name, request.reason, request.run_id) == (REVERIFICATION_JOB, ARTIFACT_CHANGED, run.run_id)
    assert artifact_changes(store, blobs, first.cursor).requests == ()


def test_artifact_change_a_b_a_fires_each_time(store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft(topic="same")
    a = run.parts.current_candidate
    run.verify()
    keys = []
    cursor = newest_seq(store)
    for topic in ("other", "same"):
        run.draft(topic=topic)
        run.verify()
        decided = artifact_changes(store, blobs, cursor)
        keys += [r.run_key for r in decided.requests]
        cursor = decided.cursor
    assert run.parts.current_candidate.artifact_hash == a.artifact_hash
    assert len(keys) == 2 and len(set(keys)) == 2


def test_lease_expiry_raises_one_handoff_then_none(store, blobs):
    lost = ResearchRun.launch(store, blobs, lease_ttl_s=0.2)
    ResearchRun.launch(store, blobs, lease_ttl_s=60.0)
    deadline = store.get_lease(lost.run_id).expires_at
    while store.db_now() <= deadline:
        pass
    first = lease_expiries(store, 0)
    (request,) = first.requests
    assert (request.job_name, request.reason, request.run_id) == (HANDOFF_JOB, LEASE_EXPIRED, lost.run_id)
    assert request.source_alive is False and request.allow_same_placement
    assert lease_expiries(store, first.cursor, already_requested={request.run_key}).requests == ()


def test_discovery_adds_partitions_reports_latest_versions_and_archives(store, blobs):
    done = ResearchRun.launch(store, blobs)
    done.draft()
    done.verify()
    done.finish()
    live = ResearchRun.launch(store, blobs)
    live.draft()
    first = discover_runs(store, blobs, 0, partitions=())
    assert set(first.add_partitions) == {done.run_id, live.run_id}
    assert len({(v.run_id, v.asset) for v in first.versions}) == len(first.versions)
    assert discover_runs(store, blobs, first.cursor, partitions=first.add_partitions).versions == ()
    archived = discover_runs(store, blobs, first.cursor, partitions=first.add_partitions, keep_finished=0)
    assert archived.remove_partitions == (done.run_id,)
    assert store.get_run(done.run_id).status == "verified"  # history stays in Baton's store
