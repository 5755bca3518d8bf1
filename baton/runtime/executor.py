"""Executing one run on a worker: adopt, hold, restore, reconcile, run the agent, finish.

The order matters:

1. adopt: a compare-and-set from the placement's reservation to this owner,
   fencing the targets at the new epoch before anything else happens;
2. hold: a heartbeat renews the lease; losing it fences the run at its next
   SDK call (and the gateway refuses the stale epoch anyway);
3. restore: `prepare_resume` applies the reverification rules; the gate
   judges this placement as the store's catalog has it now, and a placement
   that can no longer host the run gives it back (reasons recorded, lease
   released: the coordinator places it elsewhere or escalates it);
4. reconcile: every operation left PREPARED or UNKNOWN is settled against its
   target before the agent does anything;
5. run the agent from the resumed boundary; a handoff request pauses it until
   the handoff commits (the run is dropped) or aborts (the agent goes on);
6. finish: the run's status follows the final boundary, set only while this
   owner still holds the epoch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from baton.ablation import Ablation, is_ablated
from baton.compat import HandoffPolicy, ResumeMode
from baton.errors import BatonError, CheckpointIntegrityError, StaleEpochError
from baton.fencing import FenceAware
from baton.handoff.placement_check import judge_placement, placements_now, unfit_reasons
from baton.handoff.quiesce import wait_for_handoff_result
from baton.handoff.resume import ResumePlan, prepare_resume
from baton.lifecycle import TERMINAL
from baton.models import Boundary, Event, EventType, Placement, RunKind
from baton.ownership import Coordinator, LeaseHolder
from baton.runtime.errors import (
    HandoffRequested,
    RunEscalated,
    RunFailed,
    RunFenced,
    WorkerStopping,
)
from baton.runtime.fleet_plan import clock_and_fleet_policy
from baton.runtime.restore_record import record_restore
from baton.runtime.sdk import RunContext
from baton.runtime.services import RuntimeServices
from baton.store.records import Lease

ADOPTION_REFUSAL = "placement cannot host the run at adoption"
"""The reason of the COMPATIBILITY_FAILED event a worker records when it refuses to host a run it adopted."""

log = logging.getLogger(__name__)

_STATUS_OF = {
    Boundary.POSTCONDITION_VERIFIED: "verified",
    Boundary.FAILED: "failed",
    Boundary.ESCALATED: "escalated",
}


@dataclass(frozen=True)
class RunOutcome:
    """How one execution of a run on this worker ended."""

    run_id: str
    result: str  # verified, failed, escalated, handed_off, fenced, stopped, refused, error
    detail: str = ""


def _reconcile_first(plan: ResumePlan) -> bool:
    """Whether open operations are settled before the agent runs: the gate's decision says so, or (its own scan,
    which reconciles only what the store lists PREPARED or UNKNOWN) the executor looks anyway."""
    ordered = plan.decision is not None and plan.decision.resume_mode is ResumeMode.RECONCILE_THEN_RESUME
    return ordered or not is_ablated(Ablation.RESUME_OPEN_OPERATIONS)


class RunExecutor:
    """Adopts and executes runs for one worker (one owner name, one placement)."""

    def __init__(
        self,
        services: RuntimeServices,
        placement: Placement,
        owner: str,
        *,
        agent_for: Callable[[RunKind], Callable[[RunContext], None]],
        lease_ttl_s: float,
        fence_targets: Sequence[FenceAware] = (),
        handoff_wait_s: float = 30.0,
        placement_of: Callable[[str], Placement] | None = None,
        policy: HandoffPolicy | None = None,
    ) -> None:
        self.services = services
        self.placement = placement
        self.placement_of = placement_of
        """Reads a placement from the catalog as it is now (None: the start-up copy is all there is)."""
        self.owner = owner
        self.agent_for = agent_for
        self.lease_ttl_s = lease_ttl_s
        self.fence_targets = tuple(fence_targets)
        self.handoff_wait_s = handoff_wait_s
        self.policy = policy
        """The gate's policy at adoption (None: the fleet's, as its coordinator moves runs)."""
        self.adopter = Coordinator(services.store, name=f"{owner}/adopter", history=services.history)

    def adopt(self, run_id: str, reserved: Lease) -> Lease | None:
        """Take a run reserved for this placement (compare-and-set on the reserved epoch); None if beaten."""
        return self.adopter.grant(
            run_id, self.owner, ttl_s=self.lease_ttl_s, observed_epoch=reserved.epoch, force=True,
            fence_targets=self.fence_targets, reason=f"adopted by {self.owner} on {self.placement.name}",
        )

    def execute(self, lease: Lease) -> RunOutcome:
        """Run an adopted run until it ends, moves away, or this owner is fenced."""
        lost = threading.Event()
        holder = LeaseHolder(self.services.store, lease, ttl_s=self.lease_ttl_s)
        heartbeat = holder.heartbeat(on_lost=lambda _exc: lost.set())
        try:
            outcome = self._drive(lease, lost)
        except (RunFenced, StaleEpochError) as exc:
            outcome = RunOutcome(lease.run_id, "fenced", str(exc))
        except Exception as exc:  # noqa: BLE001 - the lease lapses and the run is handed off
            log.exception("run %s on %s: unexpected error", lease.run_id, self.owner)
            outcome = RunOutcome(lease.run_id, "error", f"{type(exc).__name__}: {exc}")
        finally:
            heartbeat.stop()
        if outcome.result in ("verified", "failed", "escalated", "stopped", "refused"):
            holder.release()
        log.info("run %s on %s: %s %s", lease.run_id, self.owner, outcome.result, outcome.detail)
        return outcome

    # -- internals ------------------------------------------------------------------------------

    def _drive(self, lease: Lease, lost: threading.Event) -> RunOutcome:
        store, run_id = self.services.store, lease.run_id
        process = f"{self.owner}/{run_id}"
        try:
            plan = prepare_resume(store, self.services.blobs, run_id, placement=self.current_placement(), epoch=lease.epoch)
        except CheckpointIntegrityError as exc:  # nothing trustworthy to resume from: a human decides
            return self._finish(lease, Boundary.ESCALATED, f"the latest checkpoint does not restore: {exc}")
        record_restore(plan)
        if plan.checkpoint.boundary in TERMINAL and not is_ablated(Ablation.RESUME_TERMINAL_GUARD):
            return self._finish(lease, plan.checkpoint.boundary, "already ended before adoption")
        refused = self._refuse_unfit_placement(lease, plan)
        if refused is not None:
            return refused
        if _reconcile_first(plan):
            self.services.reconciler(process).reconcile_run(run_id)
        if store.get_run(run_id).status == "escalated":
            return RunOutcome(run_id, "escalated", "an operation stayed UNKNOWN after reconciliation")
        ctx = RunContext(self.services, plan, owner=self.owner, process=process, lease_lost=lost)
        agent = self.agent_for(ctx.run_kind)
        move_aborted = False
        while True:
            try:
                if move_aborted:
                    move_aborted = False
                    ctx.carry_on_after_aborted_move()
                agent(ctx)
            except HandoffRequested as request:
                answer = wait_for_handoff_result(store, run_id, request.signal.request_seq, timeout_s=self.handoff_wait_s)
                if answer is EventType.OWNERSHIP_TRANSFERRED or lost.is_set():
                    return RunOutcome(run_id, "handed_off", request.signal.reason)
                move_aborted = True  # aborted (or undecided while we still hold the epoch): carry on
                continue
            except WorkerStopping as exc:
                return RunOutcome(run_id, "stopped", str(exc))
            except RunFenced:
                raise
            except (RunFailed, RunEscalated) as exc:
                return self._finish(lease, ctx.boundary, str(exc))
            except BatonError as exc:  # budget exhausted, a refused capability, a boundary misuse...
                return self._end_with(ctx, lease, exc)
            except Exception as exc:  # noqa: BLE001 - an agent bug fails its run, not the worker
                log.exception("agent of run %s raised", run_id)
                return self._end_with(ctx, lease, exc)
            if ctx.boundary in TERMINAL:
                return self._finish(lease, ctx.boundary, "agent finished")
            return self._end_with(ctx, lease, RuntimeError(f"agent returned at {ctx.boundary.value}"))

    def _refuse_unfit_placement(self, lease: Lease, plan: ResumePlan) -> RunOutcome | None:
        """The gate on this placement as the store's catalog has it now; the refusal (reasons recorded) if it can no
        longer host the run, None if it can. The caller releases the lease, so the run is placed again."""
        store, run_id = self.services.store, lease.run_id
        placement = placements_now(store, {plan.placement.name: plan.placement})[1][plan.placement.name]
        now, policy = (store.db_now(), self.policy) if self.policy is not None else clock_and_fleet_policy(store)
        decision = judge_placement(plan.restored, placement, policy, now=now,
                                   has_unresolved_operations=bool(plan.unresolved_operations))
        unfit = unfit_reasons(decision)
        if not unfit:
            return None
        reasons = ", ".join(reason.value for reason in unfit)
        checkpoint = plan.checkpoint
        store.append_event(Event(
            event_type=EventType.COMPATIBILITY_FAILED, run_id=run_id, at=now, checkpoint_id=checkpoint.checkpoint_id,
            release_id=checkpoint.release_id, state_schema=checkpoint.schema_version,
            resume_boundary=checkpoint.boundary.value, source_placement=plan.restored.parts.placement.name,
            target_placement=placement.name, source_epoch=lease.epoch, reason=ADOPTION_REFUSAL,
            compatibility_decision=decision.model_dump(mode="json"),
            detail={"adopted_by": self.owner, "refusals": {placement.name: [r.value for r in decision.reasons]}},
        ))
        return RunOutcome(run_id, "refused", f"{placement.name} can no longer host the run ({reasons})")

    def current_placement(self) -> Placement:
        """This worker's placement as the catalog has it at this resume: an operator may have changed it (a lowered
        ceiling, a new region) since the worker started, and the resume must weigh what holds now.

        A gateway that caps requests at the placement's ceiling takes the ceiling read here, so that it does not
        admit, for any run of this worker, more than the catalog allows now."""
        placement = self.placement if self.placement_of is None else self.placement_of(self.placement.name)
        gateway = self.services.gateway
        if gateway.ceiling is not None and gateway.ceiling != placement.authority_ceiling:
            log.info("placement %s: gateway ceiling %s -> %s", placement.name, gateway.ceiling.value,
                     placement.authority_ceiling.value)
            gateway.ceiling = placement.authority_ceiling
        return placement

    def _end_with(self, ctx: RunContext, lease: Lease, exc: BaseException) -> RunOutcome:
        """End the run on an error its agent did not handle: failed, unless its side effect has already committed
        (COMMITTED): then a target holds what the run did, and "failed" would hide it, so a human decides."""
        committed = ctx.boundary is Boundary.COMMITTED
        try:
            if committed:
                ctx.escalate(f"side effect committed, then {type(exc).__name__}: {exc}")
            ctx.fail(f"{type(exc).__name__}: {exc}")
        except (RunFailed, RunEscalated):
            pass
        fallback = Boundary.ESCALATED if committed else Boundary.FAILED
        return self._finish(lease, fallback if ctx.boundary not in TERMINAL else ctx.boundary, str(exc))

    def _finish(self, lease: Lease, boundary: Boundary, detail: str) -> RunOutcome:
        """Record the run's end, but only while this owner still holds its epoch."""
        store, run_id = self.services.store, lease.run_id
        status = _STATUS_OF.get(boundary, "failed")
        current = store.get_lease(run_id)
        if current.owner != self.owner or current.epoch != lease.epoch:
            raise RunFenced(f"run {run_id!r}: lost epoch {lease.epoch} before recording {status}")
        store.set_run_status(run_id, status, {"finished_by": self.owner, "detail": detail[:500],
                                              "placement": self.placement.name})
        if status == "escalated":
            store.append_event(Event(event_type=EventType.RUN_ESCALATED, run_id=run_id, at=store.db_now(),
                                     source_placement=self.placement.name, source_epoch=lease.epoch,
                                     reason=detail[:500]))
        store.append_event(Event(
            event_type=EventType.RUN_FINISHED, run_id=run_id, at=store.db_now(), source_placement=self.placement.name,
            source_epoch=lease.epoch, resume_boundary=boundary.value, reason=status, detail={"detail": detail[:500]},
        ))
        return RunOutcome(run_id, status, detail)
