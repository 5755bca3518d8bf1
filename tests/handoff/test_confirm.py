"""confirm_resume: the first checkpoint after a resume must keep budget, authority, evidence and lineage."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from baton.checkpoints import RunParts, restore
from baton.handoff import HandoffCoordinator, HandoffRequest, ResumePlan, confirm_resume, prepare_resume
from baton.models import (
    AuthorityLevel,
    Boundary,
    BudgetLedger,
    BudgetUsage,
    Candidate,
    EventType,
    VerdictResult,
    VerifierEvidence,
)
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import SOURCE, V7, V8, SeededRun, events, place, seed_run

SANDBOX = place("sandbox", ceiling=AuthorityLevel.SANDBOX_MUTATE)


def resumed(store: SqlStore, blobs: BlobStore, target=SANDBOX) -> tuple[SeededRun, ResumePlan]:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    outcome = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, target)}, quiesce_timeout_s=0.1).handoff(
        HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert outcome.committed
    plan = prepare_resume(store, blobs, run.run_id, placement=target, epoch=2)
    run.lease = store.get_lease(run.run_id)
    run.parts = dataclasses.replace(run.parts, placement=target, authority=plan.authority)
    return run, plan


def first_after(run: SeededRun, plan: ResumePlan, boundary: Boundary, parts: RunParts) -> list[str]:
    checkpoint = run.seal(boundary, parts=parts)
    return confirm_resume(run.store, plan, checkpoint, restore(run.blobs, checkpoint))


def test_a_faithful_first_transition_is_verified(store: SqlStore, blobs: BlobStore) -> None:
    run, plan = resumed(store, blobs)
    assert first_after(run, plan, Boundary.VERIFIED, run.parts) == []
    verified = events(store, run.run_id, EventType.RESUME_VERIFIED)[-1]
    assert verified.authority_after == "SANDBOX_MUTATE" and verified.release_id == V7.release_id


def test_budget_decrease_is_caught(store: SqlStore, blobs: BlobStore) -> None:
    run, plan = resumed(store, blobs)
    fresh = BudgetLedger(limits=run.parts.budget.limits)  # a new worker that "forgot" what was spent
    problems = first_after(run, plan, Boundary.VERIFIED, dataclasses.replace(run.parts, budget=fresh))
    assert problems == ["budget usage decreased across the handoff"]
    failed = events(store, run.run_id, EventType.REVALIDATION_FAILED)[-1]
    assert failed.reason == "budget usage decreased across the handoff" and failed.target_epoch == 2


def test_replaced_limits_are_caught(store: SqlStore, blobs: BlobStore) -> None:
    run, plan = resumed(store, blobs)
    looser = run.parts.budget.limits.model_copy(update={"model_spend_usd": Decimal("500")})
    ledger = run.parts.budget.model_copy(update={"limits": looser})
    assert first_after(run, plan, Boundary.VERIFIED, dataclasses.replace(run.parts, budget=ledger)) == [
        "budget limits were replaced across the handoff"]


def test_authority_expansion_is_caught(store: SqlStore, blobs: BlobStore) -> None:
    run, plan = resumed(store, blobs)
    copied = plan.authority.model_copy(update={"level": AuthorityLevel.EXTERNAL_MUTATE})  # copied, not re-derived
    problems = first_after(run, plan, Boundary.VERIFIED, dataclasses.replace(run.parts, authority=copied))
    assert problems == ["authority EXTERNAL_MUTATE exceeds the resumed ceiling SANDBOX_MUTATE"]


def test_evidence_for_another_hash_is_caught(store: SqlStore, blobs: BlobStore) -> None:
    run, plan = resumed(store, blobs)
    regenerated = Candidate(candidate_id="report-1", kind="report", artifact_hash=blobs.put(b"- regenerated report\n"),
                            produced_by_release=V7.release_id, created_at=store.db_now())
    # VERIFIED with the old evidence only: it names the previous hash, not the regenerated one.
    parts = dataclasses.replace(run.parts, candidates=(regenerated,))
    problems = first_after(run, plan, Boundary.VERIFIED, parts)
    assert problems == ["boundary VERIFIED without passing evidence for the current candidate hash"]


def test_failing_evidence_does_not_count(store: SqlStore, blobs: BlobStore) -> None:
    run, plan = resumed(store, blobs)
    failing = VerifierEvidence(candidate_hash=run.candidate.artifact_hash, verifier_version="citations-1",
                               result=VerdictResult.FAIL, verified_at=store.db_now())
    problems = first_after(run, plan, Boundary.VERIFIED, dataclasses.replace(run.parts, evidence=(failing,)))
    assert problems and "without passing evidence" in problems[0]


def test_a_silent_release_change_is_caught(store: SqlStore, blobs: BlobStore) -> None:
    run, plan = resumed(store, blobs, target=place("eu-b"))
    problems = first_after(run, plan, Boundary.VERIFIED, dataclasses.replace(run.parts, release=V8))
    assert len(problems) == 1 and "neither the checkpoint's nor the one the gate allowed" in problems[0]


def test_budget_must_cover_store_charges_not_only_the_checkpoint(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    store.append_budget_charge(run.run_id, 1, run.parts.budget.used.plus(BudgetUsage(tool_calls=4)), "unsealed work")
    outcome = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, place("eu-b"))},
                                 quiesce_timeout_s=0.1).handoff(HandoffRequest(run.run_id, "x", source_alive=False))
    assert outcome.committed
    plan = prepare_resume(store, blobs, run.run_id, placement=place("eu-b"), epoch=2)
    run.lease = store.get_lease(run.run_id)
    # Sealing the checkpoint's own usage (without the unsealed tool calls) is a decrease.
    problems = first_after(run, plan, Boundary.VERIFIED, dataclasses.replace(run.parts, placement=place("eu-b")))
    assert problems == ["budget usage decreased across the handoff"]


@pytest.mark.parametrize("epoch_offset", [1])
def test_checkpoint_of_another_epoch_is_caught(store: SqlStore, blobs: BlobStore, epoch_offset: int) -> None:
    run, plan = resumed(store, blobs)
    from baton.ownership import Coordinator

    Coordinator(store).grant(run.run_id, "someone-else", ttl_s=30, force=True)
    run.lease = store.get_lease(run.run_id)
    problems = first_after(run, plan, Boundary.VERIFIED, run.parts)
    assert problems == [f"sealed at epoch {plan.epoch + epoch_offset}, resumed at {plan.epoch}"]
