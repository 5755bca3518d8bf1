"""Re-verify a run's current candidate: the verifier again, on the exact recorded bytes.

The newest checkpoint names the candidate; its bytes come from the blob store
(verified against the candidate's hash on read), its inputs from the run's
observation log, and the verifier from `baton.replay_derivers` (the same
function the agent's SDK called). Only observations still valid by the database
clock count as citable, so a report citing a lapsed observation now fails.
The verdict is stored as a `VerifierEvidence` record and announced by one
EVIDENCE_RECORDED event; the run's checkpoint chain is not touched (it belongs
to the lease holder).
"""

from __future__ import annotations

from dataclasses import dataclass

from baton.agents.derivers import DERIVERS
from baton.checkpoints import RestoredRun, get_record, put_record, restore
from baton.errors import BatonError
from baton.models import Candidate, Event, EventType, ExecutionCheckpoint, VerifierEvidence
from baton.replay import valid_refs_at
from baton.replay_derivers import CANDIDATE_INPUTS_KEY, Inputs
from baton.store.base import SqlStore
from baton.store.blobs import Blobs


class ReverificationError(BatonError):
    """The run cannot be re-verified (no checkpoint, no candidate, no verifier, inputs not recorded)."""


@dataclass(frozen=True)
class Reverification:
    """The outcome of one re-verification."""

    run_id: str
    checkpoint: ExecutionCheckpoint
    candidate: Candidate
    evidence: VerifierEvidence
    evidence_ref: str
    seq: int
    """The seq of the EVIDENCE_RECORDED event."""


def _inputs(restored: RestoredRun, candidate: Candidate, blobs: Blobs) -> Inputs:
    recorded = restored.parts.state.memory.get(CANDIDATE_INPUTS_KEY) or {}
    refs = recorded.get(candidate.candidate_id) if isinstance(recorded, dict) else None
    if not isinstance(refs, list):
        raise ReverificationError(f"{restored.checkpoint.run_id}: inputs of {candidate.candidate_id} were not recorded")
    by_ref = {o.record_ref(): o for o in restored.observations}
    inputs = []
    for ref in refs:
        observation = by_ref.get(str(ref))
        if observation is None:
            raise ReverificationError(f"{candidate.candidate_id}: input {ref} is not in the run's observation log")
        inputs.append((observation, blobs.get(observation.content_ref)))
    return inputs


def reverify_run(store: SqlStore, blobs: Blobs, run_id: str, *, reason: str = "reverification") -> Reverification:
    """Re-run the verifier on the current candidate of `run_id` and record the evidence with an event."""
    head = store.latest_checkpoint(run_id)
    if head is None:
        raise ReverificationError(f"run {run_id} has no checkpoint to re-verify")
    restored = restore(blobs, head)
    candidate = restored.parts.current_candidate
    if candidate is None:
        raise ReverificationError(f"run {run_id} has no candidate at checkpoint {head.checkpoint_id}")
    deriver = DERIVERS.get(candidate.kind)
    if deriver is None:
        raise ReverificationError(f"no verifier for candidate kind {candidate.kind!r} of run {run_id}")
    artifact = blobs.get(candidate.artifact_hash)  # re-hashed on read: the exact bytes or an IntegrityError
    now = store.db_now()
    verdict = deriver.verify(artifact, _inputs(restored, candidate, blobs), valid_refs_at(restored, now))
    evidence = VerifierEvidence(
        candidate_hash=candidate.artifact_hash, verifier_version=verdict.verifier_version,
        inputs={"checkpoint_id": head.checkpoint_id, "checkpoint_hash": head.checkpoint_hash},
        result=verdict.result, detail=verdict.detail, verified_at=now,
    )
    ref = put_record(blobs, evidence)
    seq = store.append_event(Event(
        event_type=EventType.EVIDENCE_RECORDED, run_id=run_id, at=now, checkpoint_id=head.checkpoint_id,
        reason=f"{reason}: {verdict.detail}",
        detail={"evidence_ref": ref, "candidate_hash": candidate.artifact_hash, "result": verdict.result.value,
                "verifier_version": verdict.verifier_version, "checkpoint_hash": head.checkpoint_hash},
    ))
    return Reverification(run_id, head, candidate, evidence, ref, seq)


def recorded_evidence(store: SqlStore, blobs: Blobs, run_id: str) -> list[tuple[int, str, VerifierEvidence]]:
    """Evidence recorded by re-verifications of `run_id`: (event seq, ref, record), oldest first."""
    found = []
    for seq, event in store.list_events(run_id=run_id, event_types=[EventType.EVIDENCE_RECORDED]):
        ref = str(event.detail.get("evidence_ref", ""))
        found.append((seq, ref, get_record(blobs, ref, VerifierEvidence, what="verifier evidence")))
    return found
