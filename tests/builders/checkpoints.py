"""Sealed checkpoint chains built from real run parts, and the v1 form a legacy writer would have sealed."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from baton.checkpoints import RunParts, build_checkpoint
from baton.models import (
    Boundary,
    Candidate,
    ExecutionCheckpoint,
    Observation,
    ResumabilityClass,
    VerdictResult,
    VerifierEvidence,
)
from baton.schema_versions import ExecutionCheckpointV1
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.records import T0, VERIFIER_BUNDLE, observation, parts


def stored_observation(blobs: BlobStore, step: int) -> Observation:
    """An observation of document `step`, its content put in `blobs`."""
    return observation(blobs.put(f"document body {step}".encode()), f"corpus://doc/{step}", freshness_s=600)


def seal(
    blobs: BlobStore,
    run_parts: RunParts,
    *,
    run_id: str = "run-1",
    parent: ExecutionCheckpoint | None = None,
    boundary: Boundary = Boundary.GENERATING,
    resumability: ResumabilityClass = ResumabilityClass.R3,
    observations: Sequence[Observation] = (),
) -> ExecutionCheckpoint:
    return build_checkpoint(
        blobs,
        run_id=run_id,
        parts=run_parts,
        new_observations=observations,
        parent=parent,
        boundary=boundary,
        resumability=resumability,
        resumability_reasons=("recorded_observations",),
        owner_epoch=1,
        sealed_at=T0,
    )


def chain(blobs: BlobStore, steps: int = 3, *, run_id: str = "run-1", base: RunParts | None = None) -> list[ExecutionCheckpoint]:
    """A run sealed `steps` times: observations each step, then a candidate with passing evidence."""
    current = parts() if base is None else base
    checkpoints: list[ExecutionCheckpoint] = []
    for step in range(steps):
        current = dataclasses.replace(current, state=current.state.model_copy(update={"step": step}))
        boundary = Boundary.GENERATING
        if step == steps - 1:
            artifact = blobs.put(b"report body")
            candidate = Candidate(
                candidate_id="c-1",
                kind="report",
                artifact_hash=artifact,
                produced_by_release=current.release.release_id,
                created_at=T0,
            )
            evidence = VerifierEvidence(
                candidate_hash=artifact, verifier_version=VERIFIER_BUNDLE, result=VerdictResult.PASS, verified_at=T0
            )
            current = dataclasses.replace(current, candidates=(candidate,), evidence=(evidence,))
            boundary = Boundary.VERIFIED
        checkpoints.append(
            seal(
                blobs,
                current,
                run_id=run_id,
                parent=checkpoints[-1] if checkpoints else None,
                boundary=boundary,
                observations=[stored_observation(blobs, step)],
            )
        )
    return checkpoints


def seed_run(store: SqlStore, blobs: BlobStore, steps: int = 3, *, run_id: str = "run-1", base: RunParts | None = None) -> list[ExecutionCheckpoint]:
    """Create a run in `store` and append a sealed chain of `steps` checkpoints."""
    checkpoints = chain(blobs, steps, run_id=run_id, base=base)
    first = checkpoints[0]
    store.create_run(run_id, first.run_kind, first.release_id, "eu-1")
    for checkpoint in checkpoints:
        store.append_checkpoint(checkpoint)
    return checkpoints


def as_v1(checkpoint: ExecutionCheckpoint, parent: ExecutionCheckpointV1 | None = None) -> ExecutionCheckpointV1:
    """The v1 form a legacy writer would have sealed for the same state (run kind lives in task state)."""
    body = checkpoint.model_dump()
    for dropped in ("schema_version", "run_kind", "constraints", "resumability_reasons", "migrated_from_hash", "migration_ref", "checkpoint_hash"):
        body.pop(dropped)
    body["budget_ref"] = body.pop("budget_ledger_ref")
    body["parent_checkpoint_hash"] = None if parent is None else parent.checkpoint_hash
    return ExecutionCheckpointV1.seal(**body)


def v1_chain(blobs: BlobStore, steps: int = 3) -> list[ExecutionCheckpointV1]:
    legacy: list[ExecutionCheckpointV1] = []
    for checkpoint in chain(blobs, steps):
        legacy.append(as_v1(checkpoint, legacy[-1] if legacy else None))
    return legacy
