"""The asset checks on their own (reverification_job's check steps, no re-verification first) over broken runs:
each fails on its own breakage and only then."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dagster import instance_for_test

from baton.models import BudgetUsage, EventType
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from pipelines.definitions import defs
from pipelines.resources import BatonResource

from .platform_support import ResearchRun

CHECK_STEPS = ["verifier_evidence_evidence_bound_to_candidate", "checkpoints_checkpoint_hashes_verify",
               "checkpoints_budget_never_decreases"]


def verdicts(home: Path, run_id: str) -> dict[str, bool]:
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("runs", [run_id])
        result = defs.resolve_job_def("reverification_job").execute_in_process(  # the checks' steps only
            instance=instance, partition_key=run_id, op_selection=CHECK_STEPS,
            resources={"baton": BatonResource(home=str(home))})
        assert result.success
        return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


SOUND = {"evidence_bound_to_candidate": True, "checkpoint_hashes_verify": True, "budget_never_decreases": True}


def verified(store: SqlStore, blobs: BlobStore) -> ResearchRun:
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    return run


def test_evidence_bound_to_another_hash_fails_only_that_check(home: Path, store: SqlStore, blobs: BlobStore) -> None:
    run = verified(store, blobs)
    assert verdicts(home, run.run_id) == SOUND
    forged = run.parts.evidence[-1].model_copy(update={"candidate_hash": blobs.put(b"a different report")})
    run.seal(run.head.boundary, parts=dataclasses.replace(run.parts, evidence=(*run.parts.evidence, forged)))
    assert verdicts(home, run.run_id) == {**SOUND, "evidence_bound_to_candidate": False}
    assert store.list_events(run_id=run.run_id, event_types=[EventType.EVIDENCE_RECORDED]) == []  # audited, not redone


def test_tampered_blob_fails_the_integrity_check(home: Path, store: SqlStore, blobs: BlobStore) -> None:
    run = verified(store, blobs)
    path = blobs._path(run.parts.current_candidate.artifact_hash)  # type: ignore[union-attr]
    path.chmod(0o644)
    path.write_bytes(b"not the verified report")
    assert verdicts(home, run.run_id)["checkpoint_hashes_verify"] is False


def test_lowered_budget_fails_the_budget_check(home: Path, store: SqlStore, blobs: BlobStore) -> None:
    run = verified(store, blobs)
    run.seal(run.head.boundary, parts=dataclasses.replace(
        run.parts, budget=run.parts.budget.model_copy(update={"used": BudgetUsage()})))
    assert verdicts(home, run.run_id) == {**SOUND, "budget_never_decreases": False}
