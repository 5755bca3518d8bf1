"""Invariants 6-8 checked over a run's sealed checkpoint chain, after the fact.

`baton.checker` judges invariants 1-5 from histories and target records. The
chain of checkpoints is enough for three more:

6. a checkpoint at VERIFIED, AWAITING_AUTHORITY, AUTHORIZED or COMMITTING holds
   passing evidence bound to the exact hash of its current candidate;
7. a checkpoint's authority never exceeds its placement's ceiling, and a move to
   another placement never raises the authority the run held before it;
8. budget usage never decreases from one checkpoint to the next.
"""

from __future__ import annotations

from baton.checkpoints import RestoredRun, restore
from baton.models import Boundary
from baton.store.base import SqlStore
from baton.store.blobs import Blobs

_EVIDENCE_BOUND = frozenset({Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY, Boundary.AUTHORIZED, Boundary.COMMITTING})


def _checkpoint_violations(run_id: str, previous: RestoredRun | None, current: RestoredRun) -> list[str]:
    found: list[str] = []
    ckpt, parts = current.checkpoint, current.parts
    where = f"run {run_id!r} checkpoint {ckpt.seq} ({ckpt.boundary.value})"
    candidate = parts.current_candidate
    if ckpt.boundary in _EVIDENCE_BOUND and not (
        candidate is not None and any(e.passed and e.applies_to(candidate.artifact_hash) for e in parts.evidence)
    ):
        found.append(f"invariant 6: {where} has no passing evidence bound to its candidate's hash")
    if not parts.placement.authority_ceiling.allows(parts.authority.level):
        found.append(f"invariant 7: {where} holds {parts.authority.level.value} above the ceiling of "
                     f"{parts.placement.name}")
    if previous is None:
        return found
    before = previous.parts
    moved = before.placement.name != parts.placement.name
    if moved and not before.authority.level.allows(parts.authority.level):
        found.append(f"invariant 7: {where} gained {parts.authority.level.value} over "
                     f"{before.authority.level.value} when it moved to {parts.placement.name}")
    if not parts.budget.used.covers(before.budget.used):
        found.append(f"invariant 8: {where} reports less budget used than checkpoint {previous.checkpoint.seq}")
    return found


def chain_violations(store: SqlStore, blobs: Blobs, run_id: str) -> list[str]:
    """Every violation of invariants 6-8 in the run's checkpoint chain (empty when none)."""
    found: list[str] = []
    previous: RestoredRun | None = None
    for checkpoint in store.list_checkpoints(run_id):
        current = restore(blobs, checkpoint)
        found += _checkpoint_violations(run_id, previous, current)
        previous = current
    return found
