"""Turning a `ResumePlan` into the state a run continues from on its new owner.

`prepare_resume` already applied the reverification rules (use modes,
evidence bound to the current hash, authority under the ceiling, boundary
rewound). This adds what only the live run can know:

* the release: after an approved behavioral migration the run continues on
  the release the gate chose, and says so in its state;
* the budget: the larger of the checkpoint's and the store's usage;
* the operation ledger: what the store holds after reconciliation, so an
  operation the old owner left COMMITTING is either settled COMMITTED (go on
  to the postcondition) or known not sent / NOT_COMMITTED (back to AUTHORIZED);
* observations still awaiting revalidation from an earlier move stay so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from baton.checkpoints import RunParts
from baton.handoff.resume import ResumePlan, latest_transfer_decision
from baton.models import Boundary, OperationLedger, OperationState, UseMode
from baton.runtime import memory_keys as keys
from baton.runtime.budget import resumed_ledger
from baton.runtime.observation_book import ObservationBook
from baton.runtime.services import RuntimeServices

_NEEDS_EVIDENCE = {Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY, Boundary.AUTHORIZED}


@dataclass
class ResumedState:
    """Parts, boundary and observation book a resumed run starts from, and what was adjusted."""

    parts: RunParts
    boundary: Boundary
    book: ObservationBook
    adjustments: list[str]


def _book(plan: ResumePlan, memory: dict[str, object]) -> ObservationBook:
    pending = memory.get(keys.PENDING_REVALIDATION)
    pending = pending if isinstance(pending, dict) else {}
    dropped = memory.get(keys.DROPPED_OBSERVATIONS)
    uses = []
    for use in plan.observation_uses:
        mode = use.mode
        earlier = pending.get(use.observation.record_ref())
        if mode is UseMode.USE_RECORDED_OBSERVATION and isinstance(earlier, str):
            mode = UseMode(earlier)
        uses.append((use.observation, mode))
    return ObservationBook(uses, dropped=dropped if isinstance(dropped, dict) else None)


def settle_commit(services: RuntimeServices, run_id: str, boundary: Boundary,
                  memory: dict[str, object]) -> tuple[Boundary, str | None]:
    """Where a run left COMMITTING stands once the store's ledger is settled (`memory` updated to match): COMMITTED
    when the store holds the pending key committed, AUTHORIZED when it holds no claim of it or NOT_COMMITTED, still
    COMMITTING otherwise."""
    if boundary is not Boundary.COMMITTING:
        return boundary, None
    pending = memory.get(keys.PENDING_OPERATION)
    key = pending.get("key") if isinstance(pending, dict) else None
    record = services.store.get_idempotency(run_id, str(key)) if key else None
    if record is not None and record.state is OperationState.COMMITTED:
        memory[keys.COMMITTED_OPERATION] = {**pending, "operation_id": record.operation_id}  # type: ignore[dict-item]
        memory.pop(keys.PENDING_OPERATION, None)
        return Boundary.COMMITTED, f"operation {record.operation_id} settled COMMITTED"
    if record is None or record.state is OperationState.NOT_COMMITTED:
        what = "was never sent" if record is None else f"{record.operation_id} is NOT_COMMITTED"
        return Boundary.AUTHORIZED, f"pending operation {what}; back to AUTHORIZED"
    return boundary, f"operation {record.operation_id} is still {record.state.value}"


def _normalize(parts: RunParts, boundary: Boundary) -> Boundary:
    """Rewind a boundary whose evidence or approval does not hold for the current candidate."""
    candidate = parts.current_candidate
    evidence_ok = candidate is not None and any(
        e.passed and e.applies_to(candidate.artifact_hash) for e in parts.evidence
    )
    if boundary in _NEEDS_EVIDENCE and not evidence_ok:
        return Boundary.CANDIDATE_READY if candidate is not None else Boundary.GENERATING
    if boundary is Boundary.AUTHORIZED and not parts.authority.approvals:
        return Boundary.AWAITING_AUTHORITY
    return boundary


def resumed_state(services: RuntimeServices, plan: ResumePlan) -> ResumedState:
    """The state the new owner of `plan.epoch` continues from."""
    store, run_id = services.store, plan.run_id
    parts = plan.restored.parts
    memory: dict[str, object] = dict(parts.state.memory)
    adjustments: list[str] = []

    release = parts.release
    decision = latest_transfer_decision(store, run_id, plan.epoch)
    if decision is not None and decision.target_release_id and decision.target_release_id != release.release_id:
        release = services.release(decision.target_release_id)
        history = list(memory.get(keys.RELEASE_HISTORY) or [])  # type: ignore[call-overload]
        history.append({"from": parts.release.release_id, "to": release.release_id, "epoch": plan.epoch,
                        "migration_class": decision.migration_class.value if decision.migration_class else None})
        memory[keys.RELEASE_HISTORY] = history
        adjustments.append(f"behavioral migration: {parts.release.model} -> {release.model}")

    boundary, settled = settle_commit(services, run_id, plan.boundary, memory)
    if settled:
        adjustments.append(settled)
    state = parts.state.model_copy(update={"memory": memory})
    resumed = dataclasses.replace(
        parts,
        release=release,
        placement=plan.placement,
        authority=plan.authority,
        evidence=plan.valid_evidence,
        budget=resumed_ledger(parts.budget, store.budget_used(run_id)),
        operations=OperationLedger(entries=tuple(store.list_operations(run_id))),
        state=state,
    )
    normalized = _normalize(resumed, boundary)
    if normalized is not boundary:
        adjustments.append(f"boundary {boundary.value} -> {normalized.value}")
    return ResumedState(parts=resumed, boundary=normalized, book=_book(plan, memory), adjustments=adjustments)
