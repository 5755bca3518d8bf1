"""Escalating a stranded run seals its last checkpoint, so the run ends carrying what it really spent.

An owner charges a model call before making it (`RunContext.call_model`), in its own transaction; the call's
checkpoint comes at the next boundary. An owner lost in between leaves that charge in the store's ledger alone.
A new owner folds it back in when it resumes (`ledger_with_store_charges`), but a run nobody can take is
escalated instead, and without a checkpoint of its own its latest checkpoint (what a bundle of it carries)
would miss the charge. So the escalation and an ESCALATED checkpoint at the escalation's epoch, whose ledger
holds every charge the store recorded, commit in one transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import replace

from baton.checkpoints import RestoredRun, seal_checkpoint
from baton.errors import StaleEpochError, StoreError
from baton.handoff.resume import ledger_with_store_charges
from baton.models import Boundary, Event, ExecutionCheckpoint
from baton.resumability import classify_resumability, sealed_browser_class
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.store.core import Tx


class _NotEscalated(Exception):
    """The escalation's checks failed inside the seal's transaction: roll the seal back."""


def escalate_sealing_ledger(
    store: SqlStore,
    blobs: Blobs,
    restored: RestoredRun,
    *,
    observed_epoch: int,
    at: dt.datetime,
    events: Callable[[ExecutionCheckpoint], Sequence[Event]],
) -> int | None:
    """Escalate the unowned run whose latest checkpoint is `restored`, sealing an ESCALATED checkpoint with it.

    The checkpoint follows `restored.checkpoint` at epoch `observed_epoch + 1` (the escalation's, no owner) with
    the same parts, except that the budget ledger's usage is raised to the store's charges. It commits in one
    transaction with the lease's new epoch, the run's status and `events` (a function of the new checkpoint).
    Returns the new epoch, or None, having written nothing, when the lease moved, someone holds
    it, the run is not active, or another checkpoint was sealed after `restored.checkpoint`.
    """
    parent = restored.checkpoint
    run_id = parent.run_id
    parts = replace(restored.parts, budget=ledger_with_store_charges(store, run_id, restored.parts.budget))
    resumability = classify_resumability(
        Boundary.ESCALATED, parts.run_kind, parts.operations, has_recorded_observations=bool(restored.observations),
        workspace=parts.workspace, constraints=parts.constraints, source=parts.placement,
        browser=sealed_browser_class(parts.run_kind),
    )

    def escalate(tx: Tx) -> None:
        if store.escalate_unowned_in(tx, run_id, observed_epoch=observed_epoch) is None:
            raise _NotEscalated

    try:
        seal_checkpoint(
            store, blobs, run_id=run_id, parts=parts, new_observations=(), parent=parent,
            boundary=Boundary.ESCALATED, resumability=resumability.resumability,
            resumability_reasons=resumability.reasons, owner_epoch=observed_epoch + 1, sealed_at=at,
            within=escalate, events=events,
        )
    except (_NotEscalated, StaleEpochError):
        return None
    except StoreError:
        latest = store.latest_checkpoint(run_id)
        if latest is not None and latest.checkpoint_id != parent.checkpoint_id:
            return None  # sealed meanwhile: its owner is back, or was when it sealed; nothing to escalate now
        raise
    return observed_epoch + 1
