"""Launching a run: record it, seal its first checkpoint, reserve it for a placement.

Every run starts the way every handoff ends: its lease is held by the
reservation owner `placement:<name>` until a worker of that placement adopts
it with a compare-and-set. So there is one adoption path for new runs and
moved runs alike, and a handoff always has a sealed checkpoint to move.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from pydantic import JsonValue

from baton.checkpoints import RunParts, seal_checkpoint
from baton.handoff.coordinator import reserved_owner
from baton.models import (
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    BudgetLimits,
    Event,
    EventType,
    ExecutionCheckpoint,
    OperationLedger,
    Placement,
    PortabilityConstraints,
    PortableRunState,
    RunKind,
)
from baton.ownership import Coordinator
from baton.resumability import classify_resumability, sealed_browser_class
from baton.runtime import memory_keys as keys
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.store.records import Lease


def default_limits(now: dt.datetime, *, deadline_s: float = 3600.0) -> BudgetLimits:
    """Generous limits for the reference agents; the deadline is `deadline_s` from `now`."""
    return BudgetLimits(
        model_spend_usd=Decimal("5.00"),
        model_calls=40,
        search_expansions=20,
        tool_calls=200,
        browser_seconds=0.0,
        sandbox_seconds=600.0,
        verification_reserve_usd=Decimal("1.00"),
        retries=5,
        deadline=now + dt.timedelta(seconds=deadline_s),
    )


@dataclass(frozen=True)
class RunSpec:
    """Everything a new run is launched with."""

    run_id: str
    kind: RunKind
    release: BehavioralRelease
    placement: Placement
    task: str
    task_input: dict[str, JsonValue]
    authority: AuthorityLevel
    policy_id: str = "fleet-policy"
    limits: BudgetLimits | None = None
    constraints: PortabilityConstraints = field(default_factory=PortabilityConstraints)


def launch_run(
    store: SqlStore,
    blobs: Blobs,
    spec: RunSpec,
    *,
    reservation_ttl_s: float,
    ownership: Coordinator | None = None,
) -> tuple[ExecutionCheckpoint, Lease]:
    """Create the run, seal checkpoint 0 at GENERATING, and reserve it for its placement.

    ValueError if the run asks for more authority than its placement's ceiling.
    """
    if not spec.placement.authority_ceiling.allows(spec.authority):
        raise ValueError(
            f"run {spec.run_id!r} asks for {spec.authority.value}, above the ceiling "
            f"{spec.placement.authority_ceiling.value} of placement {spec.placement.name}"
        )
    now = store.db_now()
    store.create_run(
        spec.run_id, spec.kind, spec.release.release_id, spec.placement.name,
        {"task": spec.task, "release": spec.release.model, "authority": spec.authority.value},
    )
    store.append_event(Event(event_type=EventType.RUN_CREATED, run_id=spec.run_id, at=now,
                             target_placement=spec.placement.name, release_id=spec.release.release_id,
                             reason=spec.task, detail={"kind": spec.kind.value}))
    parts = RunParts(
        run_kind=spec.kind,
        release=spec.release,
        placement=spec.placement,
        state=PortableRunState(task=spec.task, memory={keys.TASK: spec.task_input}),
        operations=OperationLedger(),
        authority=AuthorityContext(level=spec.authority, policy_id=spec.policy_id),
        budget=BudgetLedger(limits=spec.limits or default_limits(now)),
        constraints=spec.constraints,
    )
    resumability = classify_resumability(
        Boundary.GENERATING, spec.kind, parts.operations, constraints=spec.constraints, source=spec.placement,
        browser=sealed_browser_class(spec.kind),
    )
    checkpoint = seal_checkpoint(
        store, blobs, run_id=spec.run_id, parts=parts, new_observations=(), parent=None, boundary=Boundary.GENERATING,
        resumability=resumability.resumability, resumability_reasons=resumability.reasons, owner_epoch=0,
        sealed_at=now,
    )
    store.append_event(Event(event_type=EventType.CHECKPOINT_SEALED, run_id=spec.run_id, at=store.db_now(),
                             checkpoint_id=checkpoint.checkpoint_id, release_id=checkpoint.release_id,
                             state_schema=checkpoint.schema_version, resume_boundary=Boundary.GENERATING.value,
                             reason="initial checkpoint", detail={"checkpoint_hash": checkpoint.checkpoint_hash}))
    coordinator = ownership or Coordinator(store, name="launcher")
    lease = coordinator.grant(
        spec.run_id, reserved_owner(spec.placement), ttl_s=reservation_ttl_s, observed_epoch=0,
        reason=f"launched: reserved for placement {spec.placement.name}",
    )
    if lease is None:  # nobody else can know the run yet
        raise RuntimeError(f"could not reserve new run {spec.run_id!r}")
    return checkpoint, lease
