"""Re-verification and its audits over real research runs in a real store (no Dagster)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from baton.lineage import changes_since
from baton.models import BudgetUsage, EventType, VerdictResult, VerifierEvidence
from baton.platform.freshness import due_reason, runs_due_for_reverification
from baton.platform.reverify import ReverificationError, recorded_evidence, reverify_run
from baton.platform.run_audit import budget_monotonic, checkpoint_integrity, evidence_bound
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.factory import open_blobs
from dagster_platform.platform_support import ResearchRun, db_later, newest_seq


def verified_run(store: SqlStore, blobs: BlobStore, **kwargs: float) -> ResearchRun:
    run = ResearchRun.launch(store, blobs, **kwargs)
    run.draft()
    assert run.verify().passed
    return run


def test_reverify_records_evidence_for_the_new_candidate(any_store: SqlStore, home: Path) -> None:
    blobs = open_blobs(home, any_store)
    run = verified_run(any_store, blobs)  # type: ignore[arg-type]
    assert evidence_bound(any_store, blobs, run.run_id).passed
    second = run.draft()
    audit = evidence_bound(any_store, blobs, run.run_id)
    assert not audit.passed and audit.metadata["candidate_hash"] == second.artifact_hash
    mark = newest_seq(any_store)

    done = reverify_run(any_store, blobs, run.run_id)

    assert done.evidence.result is VerdictResult.PASS
    assert done.evidence.candidate_hash == second.artifact_hash
    ((seq, event),) = any_store.list_events(after_seq=mark)
    assert seq == done.seq and event.event_type is EventType.EVIDENCE_RECORDED
    assert event.detail["evidence_ref"] == done.evidence_ref
    assert recorded_evidence(any_store, blobs, run.run_id)[-1][1] == done.evidence_ref
    assert evidence_bound(any_store, blobs, run.run_id).passed
    (recorded,) = changes_since(any_store, blobs, mark).recorded_evidence
    assert recorded.evidence_ref == done.evidence_ref and recorded.candidate_hash == second.artifact_hash


def test_reverify_fails_a_report_whose_observations_lapsed(store: SqlStore, blobs: BlobStore) -> None:
    run = verified_run(store, blobs, freshness_s=0.0)  # verified as recorded; stale by the next db clock reading
    done = reverify_run(store, blobs, run.run_id)
    assert done.evidence.result is VerdictResult.FAIL
    assert "not a recorded observation" in done.evidence.detail


def test_reverify_without_candidate_is_a_clear_error(store: SqlStore, blobs: BlobStore) -> None:
    run = ResearchRun.launch(store, blobs)
    with pytest.raises(ReverificationError, match="no candidate"):
        reverify_run(store, blobs, run.run_id)
    with pytest.raises(ReverificationError, match="no checkpoint"):
        reverify_run(store, blobs, "run-never")


def test_due_when_evidence_unbound_or_observations_lapse(store: SqlStore, blobs: BlobStore) -> None:
    run = verified_run(store, blobs, freshness_s=600.0)
    assert due_reason(store, blobs, run.run_id, store.db_now()) is None
    later = due_reason(store, blobs, run.run_id, db_later(store, 3600))
    assert later is not None and "lapsed" in later.reason
    run.draft()
    assert [d.run_id for d in runs_due_for_reverification(store, blobs)] == [run.run_id]
    reverify_run(store, blobs, run.run_id)
    assert runs_due_for_reverification(store, blobs) == []
    run.finish()
    assert runs_due_for_reverification(store, blobs) == []  # only active runs


def test_integrity_fails_on_a_tampered_blob(store: SqlStore, blobs: BlobStore) -> None:
    run = verified_run(store, blobs)
    assert checkpoint_integrity(store, blobs, run.run_id).passed
    digest = run.parts.current_candidate.artifact_hash.split(":", 1)[1]  # type: ignore[union-attr]
    path = blobs.root / digest[:2] / digest[2:]
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes() + b"\nan extra claim\n")
    audit = checkpoint_integrity(store, blobs, run.run_id)
    assert not audit.passed and "IntegrityError" in audit.description


def test_evidence_bound_fails_for_evidence_of_another_hash(store: SqlStore, blobs: BlobStore) -> None:
    run = verified_run(store, blobs)
    good = run.parts.evidence[-1]
    forged = good.model_copy(update={"candidate_hash": blobs.put(b"another report")})
    assert isinstance(forged, VerifierEvidence)
    run.seal(run.head.boundary, parts=dataclasses.replace(run.parts, evidence=(*run.parts.evidence, forged)))
    audit = evidence_bound(store, blobs, run.run_id)
    assert not audit.passed and audit.metadata["evidence_candidate_hash"] == forged.candidate_hash


def test_budget_check_fails_when_usage_goes_down(store: SqlStore, blobs: BlobStore) -> None:
    run = verified_run(store, blobs)
    assert budget_monotonic(store, blobs, run.run_id).passed
    lowered = run.parts.budget.model_copy(update={"used": BudgetUsage()})
    run.seal(run.head.boundary, parts=dataclasses.replace(run.parts, budget=lowered))
    audit = budget_monotonic(store, blobs, run.run_id)
    assert not audit.passed and "model_calls" in audit.metadata["lower"]  # type: ignore[operator]
