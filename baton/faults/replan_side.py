"""The fault of `replanned-after-verify`: a checkpoint at VERIFIED whose current candidate nothing verified.

The SDK never seals one: `propose` always seals CANDIDATE_READY and `verify` at
CANDIDATE_READY always runs the check. A second writer holding the run's epoch
does not go through the SDK: here the case is that writer. It appends, at the
dead owner's epoch and on top of its VERIFIED checkpoint, one more VERIFIED
checkpoint whose candidate list ends with a re-planned deployment spec; the
evidence stays what it was (a passing verdict on the first spec). It is sealed
like any checkpoint (hash, chain, epoch), so restore's integrity checks pass:
only the evidence's binding to the exact candidate hash says it is unverified.
"""

from __future__ import annotations

import dataclasses

from baton.checkpoints import restore, seal_checkpoint
from baton.identity import sha256_ref
from baton.models import Boundary, Candidate
from baton.runtime import memory_keys as keys
from baton.store.base import SqlStore
from baton.store.blobs import Blobs


def append_unverified_replan(store: SqlStore, blobs: Blobs, run_id: str, content: bytes, summary: str) -> str:
    """Seal a VERIFIED checkpoint over the run's latest one with `content` as its new current candidate; a note."""
    latest = store.latest_checkpoint(run_id)
    if latest is None or latest.boundary is not Boundary.VERIFIED:
        raise RuntimeError(f"run {run_id}: the latest checkpoint is not at VERIFIED ({latest and latest.boundary})")
    parts = restore(blobs, latest).parts
    previous = parts.current_candidate
    assert previous is not None
    now = store.db_now()
    candidate = Candidate(
        candidate_id=f"{previous.kind}-{len(parts.candidates) + 1}", kind=previous.kind,
        artifact_hash=sha256_ref(content), produced_by_release=parts.release.release_id,
        parent_candidate=previous.artifact_hash, summary=summary, created_at=now,
    )
    memory = dict(parts.state.memory)
    inputs = dict(memory.get(keys.CANDIDATE_INPUTS) or {})
    inputs[candidate.candidate_id] = list(inputs.get(previous.candidate_id, []))  # built from the same observations
    memory[keys.CANDIDATE_INPUTS] = inputs
    state = parts.state.model_copy(update={"memory": memory, "step": parts.state.step + 1,
                                           "candidate_refs": parts.state.candidate_refs + (candidate.record_ref(),)})
    replanned = dataclasses.replace(parts, candidates=parts.candidates + (candidate,), state=state)
    sealed = seal_checkpoint(
        store, blobs, contents=(content,), run_id=run_id, parts=replanned, new_observations=(), parent=latest,
        boundary=Boundary.VERIFIED, resumability=latest.resumability, resumability_reasons=latest.resumability_reasons,
        owner_epoch=store.current_epoch(run_id), sealed_at=now,
    )
    return (f"a second writer at epoch {sealed.owner_epoch} sealed checkpoint {sealed.seq} at VERIFIED with re-planned "
            f"candidate {candidate.artifact_hash[:19]} ({summary}); the evidence verified {previous.artifact_hash[:19]}")
