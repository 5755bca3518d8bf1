"""The reverification rules of sec. 22 as the new owner applies them on restore."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pytest

from baton.authority import AuthorityService
from baton.compat import BehavioralMigration, GateReason, HandoffPolicy, MigrationApproval, MigrationClass
from baton.errors import AuthorityDeniedError
from baton.handoff import HandoffCoordinator, HandoffOutcome, HandoffRequest, prepare_resume
from baton.models import (
    AuthorityLevel,
    Boundary,
    BudgetUsage,
    Candidate,
    EventType,
    UseMode,
)
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import OPERATION, SOURCE, V7, V8, SeededRun, events, one, place, seed_run


def move(store: SqlStore, blobs: BlobStore, run: SeededRun, *targets, policy: HandoffPolicy | None = None) -> HandoffOutcome:
    catalog = {p.name: p for p in (SOURCE, *targets)}
    return HandoffCoordinator(store, blobs, catalog, policy=policy, quiesce_timeout_s=0.1).handoff(
        HandoffRequest(run.run_id, "rebalance", source_alive=False))


def test_authority_is_reduced_to_the_target_ceiling(store: SqlStore, blobs: BlobStore, authority: AuthorityService) -> None:
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    sandbox = place("sandbox", ceiling=AuthorityLevel.SANDBOX_MUTATE)
    outcome = move(store, blobs, run, sandbox)
    assert outcome.committed and outcome.decision is not None
    assert (outcome.authority_before, outcome.authority_after) == (AuthorityLevel.EXTERNAL_MUTATE, AuthorityLevel.SANDBOX_MUTATE)
    assert GateReason.AUTHORITY_DOWNGRADED in outcome.decision.reasons and outcome.decision.requires_reauthorization
    moved = one(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED)
    assert (moved.authority_before, moved.authority_after) == ("EXTERNAL_MUTATE", "SANDBOX_MUTATE")

    plan = prepare_resume(store, blobs, run.run_id, placement=sandbox, epoch=2)
    assert plan.authority.level is AuthorityLevel.SANDBOX_MUTATE
    assert plan.authority.downgraded_from is AuthorityLevel.EXTERNAL_MUTATE
    assert plan.authority.approvals == () and plan.requires_reauthorization
    assert plan.boundary is Boundary.AWAITING_AUTHORITY  # the approval does not travel past the ceiling
    downgraded = one(store, run.run_id, EventType.AUTHORITY_DOWNGRADED)
    assert (downgraded.authority_before, downgraded.authority_after) == ("EXTERNAL_MUTATE", "SANDBOX_MUTATE")
    assert downgraded.detail["mutation_paused"] is False
    # Observation, planning and verification survive; external mutation is refused from policy.
    with pytest.raises(AuthorityDeniedError):
        authority.issue(run_id=run.run_id, epoch=2, operation=OPERATION, artifact_hash=run.candidate.artifact_hash,
                        level=AuthorityLevel.EXTERNAL_MUTATE, lease=store.get_lease(run.run_id), placement=sandbox,
                        context=plan.authority, now=store.db_now())


def test_changed_artifact_sends_the_run_back_to_verification(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    # The source re-serialised its report (one byte differs) after verifying it: a new artifact identity.
    rewritten = blobs.get(run.candidate.artifact_hash) + b"\n"
    changed = Candidate(candidate_id="report-1", kind="report", artifact_hash=blobs.put(rewritten),
                        produced_by_release=V7.release_id, parent_candidate=run.candidate.artifact_hash,
                        created_at=store.db_now())
    run.seal(Boundary.VERIFIED, parts=dataclasses.replace(run.parts, candidates=(*run.parts.candidates, changed)))
    target = place("eu-b")
    move(store, blobs, run, target)

    plan = prepare_resume(store, blobs, run.run_id, placement=target, epoch=2)
    assert plan.valid_evidence == () and len(plan.dropped_evidence) == 1
    assert plan.dropped_evidence[0].candidate_hash != changed.artifact_hash
    assert plan.requires_reverification and plan.boundary is Boundary.CANDIDATE_READY
    required = one(store, run.run_id, EventType.REVERIFICATION_REQUIRED)
    assert required.detail["dropped"] == [plan.dropped_evidence[0].candidate_hash]


def test_changed_runtime_requires_reverification_of_unchanged_artifacts(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    upgraded = place("eu-new", image="worker:2")
    outcome = move(store, blobs, run, upgraded)
    assert outcome.decision is not None and outcome.decision.requires_reverification
    assert GateReason.RUNTIME_CHANGED in outcome.decision.reasons
    plan = prepare_resume(store, blobs, run.run_id, placement=upgraded, epoch=2)
    assert plan.valid_evidence == () and plan.boundary is Boundary.CANDIDATE_READY


def test_stale_observations_must_be_refreshed(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED, freshness_s=600)
    target = place("eu-b")
    move(store, blobs, run, target)
    fresh = prepare_resume(store, blobs, run.run_id, placement=target, epoch=2)
    assert {u.mode for u in fresh.observation_uses} == {UseMode.REVALIDATE_LIVE_STATE}  # new environment
    later = store.db_now() + dt.timedelta(seconds=601)  # the resume happens after the freshness budget ran out
    stale = prepare_resume(store, blobs, run.run_id, placement=target, epoch=2, now=later)
    assert {u.mode for u in stale.observation_uses} == {UseMode.REFRESH_STALE_OBSERVATION}
    started = events(store, run.run_id, EventType.REVALIDATION_STARTED)[-1]
    assert set(started.detail["modes"].values()) == {"REFRESH_STALE_OBSERVATION"}


def test_same_environment_uses_recorded_observations(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    lease = store.get_lease(run.run_id)
    plan = prepare_resume(store, blobs, run.run_id, placement=SOURCE, epoch=lease.epoch)  # a restart in place
    assert {u.mode for u in plan.observation_uses} == {UseMode.USE_RECORDED_OBSERVATION}
    assert plan.observations_to_revalidate == () and not events(store, run.run_id, EventType.REVALIDATION_STARTED)


def test_behavioral_migration_needs_policy_and_approval(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    v8_only = place("us-v8", region="us-east", releases=(V8,))
    refused = move(store, blobs, run, v8_only)
    assert not refused.committed
    assert events(store, run.run_id, EventType.COMPATIBILITY_FAILED)[-1].detail["refusals"]["us-v8"][0] == (
        GateReason.RELEASE_INCOMPATIBLE.value)

    allowed = (BehavioralMigration(from_release_id=V7.release_id, to_release=V8),)
    unapproved = move(store, blobs, run, v8_only, policy=HandoffPolicy(allowed_behavioral_migrations=allowed))
    assert not unapproved.committed
    assert events(store, run.run_id, EventType.COMPATIBILITY_FAILED)[-1].detail["refusals"]["us-v8"][0] == (
        GateReason.BEHAVIORAL_MIGRATION_UNAPPROVED.value)
    assert store.current_epoch(run.run_id) == 1

    approval = MigrationApproval(approval_id="mig-1", from_release_id=V7.release_id, to_release_id=V8.release_id,
                                 approved_by="release-board", expires_at=store.db_now() + dt.timedelta(hours=1))
    policy = HandoffPolicy(allowed_behavioral_migrations=allowed, approvals=(approval,))
    outcome = move(store, blobs, run, v8_only, policy=policy)
    assert outcome.committed and outcome.decision is not None
    decision = outcome.decision
    assert decision.migration_class is MigrationClass.BEHAVIORAL and decision.target_release_id == V8.release_id
    assert decision.requires_revalidation and decision.requires_reverification and decision.requires_reauthorization
    assert GateReason.BEHAVIORAL_MIGRATION_APPROVED in decision.reasons

    plan = prepare_resume(store, blobs, run.run_id, placement=v8_only, epoch=2)
    assert plan.resume_release_id == V8.release_id and plan.checkpoint.release_id == V7.release_id
    assert plan.valid_evidence == () and plan.authority.approvals == ()
    assert plan.boundary is Boundary.CANDIDATE_READY
    assert one(store, run.run_id, EventType.RESUME_STARTED).detail["resume_release_id"] == V8.release_id


def test_expired_migration_approval_does_not_count(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    expired = MigrationApproval(approval_id="mig-0", from_release_id=V7.release_id, to_release_id=V8.release_id,
                                approved_by="release-board", expires_at=store.db_now() - dt.timedelta(seconds=1))
    policy = HandoffPolicy(allowed_behavioral_migrations=(BehavioralMigration(from_release_id=V7.release_id, to_release=V8),),
                           approvals=(expired,))
    assert not move(store, blobs, run, place("us-v8", releases=(V8,)), policy=policy).committed


def test_expired_approval_falls_back_to_awaiting_authority(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED, approval_valid_s=600)
    target = place("eu-b")
    move(store, blobs, run, target)
    later = store.db_now() + dt.timedelta(seconds=601)  # the migration outlasted the approval
    plan = prepare_resume(store, blobs, run.run_id, placement=target, epoch=2, now=later)
    assert plan.authority.approvals == () and plan.boundary is Boundary.AWAITING_AUTHORITY
    assert plan.valid_evidence  # evidence still binds; only the approval lapsed


def test_budget_charged_after_the_last_seal_travels_and_exhaustion_is_reported(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED, deadline_s=600)
    sealed_usage = run.parts.budget.used
    # Work the source did and paid for after its last checkpoint, recorded in the store's charges.
    store.append_budget_charge(run.run_id, 1, sealed_usage.plus(BudgetUsage(model_calls=2, model_spend_usd=Decimal("0.7"))),
                               "calls after the last seal")
    target = place("eu-b")
    move(store, blobs, run, target)
    plan = prepare_resume(store, blobs, run.run_id, placement=target, epoch=2)
    assert plan.budget is not None and plan.budget.used.covers(sealed_usage)
    assert plan.budget.used.model_calls == sealed_usage.model_calls + 2
    assert plan.budget.limits == run.parts.budget.limits and plan.budget_exhausted == ()
    late = prepare_resume(store, blobs, run.run_id, placement=target, epoch=2,
                          now=store.db_now() + dt.timedelta(seconds=601))
    assert late.budget_exhausted == ("deadline",)
    assert events(store, run.run_id, EventType.RESUME_STARTED)[-1].detail["budget_exhausted"] == ["deadline"]
