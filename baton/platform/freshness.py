"""Which runs need re-verification because their evidence or its observations went stale.

A run is due when its current candidate has no evidence bound to it, or when an
observation the candidate was built from lapsed (by the database clock) after
the newest bound evidence was produced. A re-verification records new evidence
at a later time, so a run is not due again until something else lapses.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from baton.checkpoints import restore
from baton.platform.run_audit import current_evidence
from baton.replay_derivers import CANDIDATE_INPUTS_KEY
from baton.store.base import SqlStore
from baton.store.blobs import Blobs

ACTIVE_STATUSES: tuple[str, ...] = ("active",)


@dataclass(frozen=True)
class Due:
    run_id: str
    reason: str
    checkpoint_hash: str
    lapsed_at: dt.datetime | None = None


def due_reason(store: SqlStore, blobs: Blobs, run_id: str, now: dt.datetime) -> Due | None:
    """Why `run_id` should be re-verified at `now`, or None."""
    head = store.latest_checkpoint(run_id)
    if head is None:
        return None
    restored = restore(blobs, head)
    candidate = restored.parts.current_candidate
    if candidate is None:
        return None
    found = current_evidence(store, blobs, head)
    if found is None or not found[1].applies_to(candidate.artifact_hash):
        return Due(run_id, "no evidence bound to the current candidate", head.checkpoint_hash)
    evidence = found[1]
    recorded = restored.parts.state.memory.get(CANDIDATE_INPUTS_KEY) or {}
    inputs = recorded.get(candidate.candidate_id, []) if isinstance(recorded, dict) else []
    wanted = {str(ref) for ref in inputs} if isinstance(inputs, list) else set()
    lapses = [o.expires_at for o in restored.observations if o.record_ref() in wanted and not o.is_fresh(now)]
    if lapses and max(lapses) > evidence.verified_at:
        return Due(run_id, "an input observation's freshness lapsed after the evidence", head.checkpoint_hash,
                   max(lapses))
    return None


def runs_due_for_reverification(store: SqlStore, blobs: Blobs, *, statuses: tuple[str, ...] = ACTIVE_STATUSES) -> list[Due]:
    """The runs (with one of `statuses`) due for re-verification now, by the database clock."""
    now = store.db_now()
    due = []
    for status in statuses:
        for run in store.list_runs(status=status):
            reason = due_reason(store, blobs, run.run_id, now)
            if reason is not None:
                due.append(reason)
    return due
