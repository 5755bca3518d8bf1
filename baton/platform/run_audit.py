"""Audits of one run's recorded state, as plain predicates (the platform's asset checks wrap them).

- `evidence_bound`: the newest evidence (a re-verification's, else the head
  checkpoint's) verified exactly the current candidate's hash.
- `checkpoint_integrity`: every checkpoint's hash matches its content and links
  to its parent's, and every blob the head references (its parts, candidates,
  evidence, observation log and contents, the candidate's bytes) verifies.
- `budget_monotonic`: no budget usage field goes down along the checkpoint chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from baton.checkpoints import get_record, restore
from baton.errors import BatonError
from baton.models import BudgetLedger, EvidenceManifest, ExecutionCheckpoint, VerifierEvidence
from baton.platform.reverify import recorded_evidence
from baton.store.base import SqlStore
from baton.store.blobs import Blobs


@dataclass(frozen=True)
class Audit:
    """A verdict with the reason and the facts behind it."""

    passed: bool
    description: str
    metadata: dict[str, JsonValue] = field(default_factory=dict)


def _head(store: SqlStore, run_id: str) -> ExecutionCheckpoint | None:
    return store.latest_checkpoint(run_id)


def current_evidence(store: SqlStore, blobs: Blobs, head: ExecutionCheckpoint) -> tuple[str, VerifierEvidence] | None:
    """The newest evidence for the head checkpoint: a re-verification recorded for it, else its own."""
    again = [(ref, ev) for _, ref, ev in recorded_evidence(store, blobs, head.run_id)
             if ev.inputs.get("checkpoint_hash") == head.checkpoint_hash]
    if again:
        return again[-1]
    restored = restore(blobs, head)
    if not restored.parts.evidence:
        return None
    manifest = get_record(blobs, head.verifier_evidence_ref, EvidenceManifest, what="evidence manifest")
    return manifest.evidence_refs[-1], restored.parts.evidence[-1]


def evidence_bound(store: SqlStore, blobs: Blobs, run_id: str) -> Audit:
    """Passes when there is no candidate yet or the newest evidence is bound to the current candidate."""
    head = _head(store, run_id)
    if head is None:
        return Audit(True, f"run {run_id} has no checkpoint yet")
    candidate = restore(blobs, head).parts.current_candidate
    if candidate is None:
        return Audit(True, "no candidate yet", {"checkpoint_id": head.checkpoint_id})
    found = current_evidence(store, blobs, head)
    if found is None:
        return Audit(False, f"candidate {candidate.artifact_hash} has no verifier evidence",
                     {"candidate_hash": candidate.artifact_hash, "checkpoint_id": head.checkpoint_id})
    ref, evidence = found
    facts: dict[str, JsonValue] = {"candidate_hash": candidate.artifact_hash, "evidence_ref": ref,
                                   "evidence_candidate_hash": evidence.candidate_hash,
                                   "checkpoint_id": head.checkpoint_id}
    if not evidence.applies_to(candidate.artifact_hash):
        return Audit(False, f"evidence {ref} verified {evidence.candidate_hash}, not the current candidate "
                     f"{candidate.artifact_hash}", facts)
    return Audit(True, f"evidence verified the current candidate ({evidence.result.value})", facts)


def checkpoint_integrity(store: SqlStore, blobs: Blobs, run_id: str) -> Audit:
    """Passes when every checkpoint hash verifies and links, and every blob the head references verifies."""
    try:
        chain = store.list_checkpoints(run_id)  # each is re-hashed when read back
        if not chain:
            return Audit(True, f"run {run_id} has no checkpoint yet")
        for parent, child in zip(chain, chain[1:]):
            if child.parent_checkpoint_hash != parent.checkpoint_hash:
                return Audit(False, f"checkpoint {child.checkpoint_id} names parent hash "
                             f"{child.parent_checkpoint_hash}, not {parent.checkpoint_hash}",
                             {"checkpoint_id": child.checkpoint_id})
        head = chain[-1]
        restored = restore(blobs, head, verify_artifact=True)
        refs = [o.content_ref for o in restored.observations]
        refs += [c.artifact_hash for c in restored.parts.candidates]
        blobs.get_many(refs)  # every one present and matching its hash
    except BatonError as exc:
        return Audit(False, f"{type(exc).__name__}: {exc}", {"run": run_id})
    return Audit(True, f"{len(chain)} checkpoints and {len(set(refs))} referenced blobs verify",
                 {"checkpoint_hash": head.checkpoint_hash, "checkpoints": len(chain), "blobs": len(set(refs))})


def budget_monotonic(store: SqlStore, blobs: Blobs, run_id: str) -> Audit:
    """Passes when each checkpoint's budget usage covers its parent's, field by field."""
    chain = store.list_checkpoints(run_id)
    previous: tuple[ExecutionCheckpoint, BudgetLedger] | None = None
    for checkpoint in chain:
        ledger = get_record(blobs, checkpoint.budget_ledger_ref, BudgetLedger, what="budget ledger")
        if previous is not None and not ledger.used.covers(previous[1].used):
            lower = [name for name in type(ledger.used).model_fields
                     if getattr(ledger.used, name) < getattr(previous[1].used, name)]
            return Audit(False, f"checkpoint {checkpoint.checkpoint_id} used less {', '.join(lower)} than "
                         f"{previous[0].checkpoint_id}", {"checkpoint_id": checkpoint.checkpoint_id, "lower": lower})
        previous = (checkpoint, ledger)
    return Audit(True, f"budget usage never decreases over {len(chain)} checkpoints", {"checkpoints": len(chain)})
