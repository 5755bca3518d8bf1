"""The handoff coordinator: a move is a guarded, two-phase state transition.

prepare: record the request, quiesce a live source at a boundary (or note that
it could not be quiesced), take the sealed checkpoint and verify every hash,
list the operations whose outcome is open, choose and reserve a target through
the compatibility gate. A failed prepare aborts and the source carries on.

commit: one store transaction (`SqlStore.commit_handoff`) advances the epoch
with a compare-and-set (fencing the old owner at the store), moves the
placement and records the lease, the fence and the transfer with the decision
and the authority after the move; then the fence-aware targets are told. A
source that never answered the quiesce request may still seal in the instant
before that transaction (the store then refuses it); such a checkpoint is
re-judged by the gate for the same target and the commit retried on it, and if
it cannot go there the move aborts with nothing committed.

The catalog is read where the move is decided and again at the commit: the
coordinator's placements say where it may place runs, the store's catalog what
each of them is now (`placement_check.placements_now`). The commit re-judges the
target if its record changed since prepare and aborts with the gate's reasons if
it no longer passes; the store's transaction compares the catalog version the
judgement read, so no catalog change commits in between unseen.

A run nobody holds that no placement can take is escalated (`stranded_after_s`):
when a prepare finds no compatible target for an unowned run, and the first such
refusal since the run last had an owner is at least that old, the same
transaction that records the refusal fences the old epoch and escalates the run.

Every gap between two durable steps is a named kill point (`baton.fault_points`);
`baton.handoff.recovery` finishes or undoes a move left half done in any of them.

Restoring on the target is the new owner's step (`baton.handoff.resume`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from baton.cancellation import OutstandingOperation, outstanding_operations
from baton.checkpoints import RestoredRun, restore
from baton.compat import HandoffDecision, HandoffPolicy
from baton.errors import BatonError
from baton.fencing import FenceAware
from baton.handoff.escalation import escalate_sealing_ledger
from baton.handoff.placement_check import judge_placement, placements_now
from baton.handoff.quiesce import wait_for_quiesce
from baton.handoff.selection import rank_targets
from baton.handoff.transform import transformed_state
from baton.history import Recorder
from baton import fault_points
from baton.fault_points import KillPoint
from baton.lifecycle import TERMINAL
from baton.models import AuthorityLevel, Event, EventType, ExecutionCheckpoint, Placement
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.store.handoff_sql import HandoffCommit, HandoffRefusal
from baton.store.records import Lease

log = logging.getLogger(__name__)

_LATE_SEAL_ATTEMPTS = 3
"""How often a commit is retried on a checkpoint the (unquiesced) source sealed inside the commit window."""

STRANDED_AFTER_S = 600.0
"""Default wait before an unowned run that no placement can take is escalated (seconds of database time)."""

_NO_TARGET = "no compatible target"

_UNSTAMPED = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
"""Placeholder time of an event the store stamps with its clock when it appends it (`stamp=True`)."""


class HandoffStatus(StrEnum):
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(frozen=True)
class HandoffRequest:
    """Why and where to move a run. `source_alive=False` skips quiescing (the worker is gone)."""

    run_id: str
    reason: str
    preferred_targets: tuple[str, ...] = ()
    excluded_placements: tuple[str, ...] = ()
    source_alive: bool = True
    allow_same_placement: bool = False  # e.g. a dead worker's run may be retried where it was


@dataclass(frozen=True)
class PreparedHandoff:
    """Everything phase one established; `commit` acts on it."""

    request: HandoffRequest
    request_seq: int
    checkpoint: ExecutionCheckpoint
    restored: RestoredRun
    source_epoch: int
    source: Placement
    target: Placement
    decision: HandoffDecision
    pending_operations: tuple[OutstandingOperation, ...]
    source_quiesced: bool


@dataclass(frozen=True)
class HandoffOutcome:
    """The end of one handoff attempt."""

    run_id: str
    status: HandoffStatus
    reason: str
    source_placement: str | None
    target_placement: str | None = None
    checkpoint_id: str | None = None
    source_epoch: int | None = None
    target_epoch: int | None = None
    new_owner: str | None = None
    decision: HandoffDecision | None = None
    abort_reason: str | None = None
    authority_before: AuthorityLevel | None = None
    authority_after: AuthorityLevel | None = None

    @property
    def committed(self) -> bool:
        return self.status is HandoffStatus.COMMITTED


def reserved_owner(placement: Placement) -> str:
    """Lease owner that reserves a run for any worker of `placement` until one adopts it."""
    return f"placement:{placement.name}"


class HandoffCoordinator:
    """Moves runs between placements; the one handoff path for every trigger."""

    def __init__(
        self,
        store: SqlStore,
        blobs: Blobs,
        placements: Mapping[str, Placement],
        *,
        policy: HandoffPolicy | None = None,
        fence_targets: Sequence[FenceAware] = (),
        lease_ttl_s: float = 30.0,
        quiesce_timeout_s: float = 5.0,
        owner_for: Callable[[Placement], str] = reserved_owner,
        ownership: Coordinator | None = None,
        stranded_after_s: float = STRANDED_AFTER_S,
    ) -> None:
        self.store = store
        self.blobs = blobs
        self.placements = dict(placements)
        self.policy = policy or HandoffPolicy()
        self.fence_targets = tuple(fence_targets)
        self.lease_ttl_s = lease_ttl_s
        self.quiesce_timeout_s = quiesce_timeout_s
        self.owner_for = owner_for
        self.ownership = ownership or Coordinator(store, name="handoff-coordinator")
        self.stranded_after_s = stranded_after_s

    def handoff(self, request: HandoffRequest) -> HandoffOutcome:
        """Prepare and, if that succeeds, commit. Never raises for a refused move: it aborts."""
        prepared = self.prepare(request)
        if isinstance(prepared, HandoffOutcome):
            return prepared
        return self.commit(prepared)

    # -- phase one --------------------------------------------------------------------------

    def prepare(self, request: HandoffRequest) -> PreparedHandoff | HandoffOutcome:
        """Quiesce, seal, record pending side effects, select and gate a target.

        Two durable commits: the request (recorded first, on its own: a live
        source answers it), then the phase's findings (sealed checkpoint, target
        selection and gate decision, or the refusal and the abort) together.
        """
        run, lease = self.store.get_run_and_lease(request.run_id)
        source_name = run.placement
        request_seq = self._append([self._event(
            EventType.HANDOFF_REQUESTED, request.run_id, reason=request.reason, source_placement=source_name,
            source_epoch=lease.epoch, detail={"source_alive": request.source_alive,
                                              "preferred": list(request.preferred_targets)},
        )])[0]
        fault_points.reached(KillPoint.PREPARE_REQUESTED)
        if run.status != "active":
            return self._abort(request, request_seq, source_name, f"run is {run.status}, not active", lease.epoch)

        quiesced = False
        if request.source_alive and lease.held_at(self.store.db_now()):
            answer = wait_for_quiesce(self.store, request.run_id, request_seq, timeout_s=self.quiesce_timeout_s)
            quiesced = answer is not None
            # Waiting took time: judge the lease as it is now. Without a wait the lease read above is
            # current enough: commit's compare-and-set on this epoch refuses the move if it has moved.
            lease = self.store.get_lease(request.run_id)

        checkpoint = self.store.latest_checkpoint(request.run_id)
        if checkpoint is None:
            return self._abort(request, request_seq, source_name, "no sealed checkpoint to move", lease.epoch)
        try:
            restored = restore(self.blobs, checkpoint, verify_artifact=True)
        except BatonError as exc:
            return self._abort(request, request_seq, source_name, f"checkpoint does not verify: {exc}", lease.epoch,
                               checkpoint=checkpoint)
        if checkpoint.boundary in TERMINAL and not lease.held_at(self.store.db_now()):
            placement = self.placements.get(source_name or "") or restored.parts.placement
            return self._reserve_to_record_end(request, request_seq, source_name, lease, checkpoint, placement)
        pending = outstanding_operations(self.store, request.run_id)

        # Only where the run is now is excluded: the checkpoint may still name an earlier
        # placement (moved, not yet sealed there), and going back there is a legitimate move.
        excluded = set(request.excluded_placements)
        if not request.allow_same_placement:
            excluded.add(source_name or restored.parts.placement.name)
        _, catalog = placements_now(self.store, self.placements)
        candidates = [p for name, p in sorted(catalog.items()) if name not in excluded]
        now = self.store.db_now()
        sealed = self._event(
            EventType.CHECKPOINT_SEALED, request.run_id, at=now, checkpoint=checkpoint,
            reason="sealed checkpoint for handoff", source_epoch=lease.epoch,
            detail={"request_seq": request_seq, "checkpoint_hash": checkpoint.checkpoint_hash,
                    "source_quiesced": quiesced},
        )
        ranked = rank_targets(restored, candidates, self.policy, now=now, preferred=request.preferred_targets,
                              has_unresolved_operations=bool(pending))
        if not ranked or not ranked[0][1].allowed:
            refusals = {target.name: [r.value for r in decision.reasons] for target, decision in ranked}
            refused = self._event(
                EventType.COMPATIBILITY_FAILED, request.run_id, at=now, checkpoint=checkpoint,
                reason=_NO_TARGET, source_epoch=lease.epoch, source_placement=source_name,
                target_placement=ranked[0][0].name if ranked else None,
                decision=ranked[0][1] if ranked else None,
                detail={"request_seq": request_seq, "refusals": refusals,  # type: ignore[dict-item]
                        "unowned": not lease.held_at(now)},
            )
            if not lease.held_at(now):
                escalated = self._escalate_if_stranded(request, request_seq, source_name, lease, restored, now,
                                                       refusals, before=(sealed, refused))
                if escalated is not None:
                    return escalated
            return self._abort(request, request_seq, source_name, _NO_TARGET, lease.epoch,
                               checkpoint=checkpoint, at=now, before=(sealed, refused))
        target, decision = ranked[0]
        self._append([
            sealed,
            self._event(
                EventType.TARGET_SELECTED, request.run_id, at=now, checkpoint=checkpoint,
                source_placement=source_name, target_placement=target.name, source_epoch=lease.epoch,
                reason=request.reason, detail={"request_seq": request_seq, "reserved_owner": self.owner_for(target),
                                               "pending_operations": [op.operation_id for op in pending]},
            ),
            self._event(
                EventType.COMPATIBILITY_PASSED, request.run_id, at=now, checkpoint=checkpoint,
                source_placement=source_name, target_placement=target.name, source_epoch=lease.epoch,
                reason=request.reason, decision=decision, detail={"request_seq": request_seq},
            ),
        ])
        fault_points.reached(KillPoint.PREPARE_RESERVED)
        return PreparedHandoff(
            request=request,
            request_seq=request_seq,
            checkpoint=checkpoint,
            restored=restored,
            source_epoch=lease.epoch,
            source=restored.parts.placement,
            target=target,
            decision=decision,
            pending_operations=pending,
            source_quiesced=quiesced,
        )

    # -- phase two --------------------------------------------------------------------------

    def commit(self, prepared: PreparedHandoff) -> HandoffOutcome:
        """Fence the old epoch and activate a new one for the target in ONE store transaction, or abort.

        `SqlStore.commit_handoff` does the compare-and-set on the epoch, moves
        the placement and records the lease, the fence and the transfer, all or
        nothing; only then are the fence-aware targets told (an early shut-out:
        the adopting worker fences them again at its own epoch before it starts).
        A checkpoint the source sealed between the last check and the
        transaction is re-judged for the same target and the commit retried on it.
        """
        run_id = prepared.request.run_id
        owner = self.owner_for(prepared.target)
        latest = self.store.latest_checkpoint(run_id)
        if latest is None or latest.checkpoint_hash != prepared.checkpoint.checkpoint_hash:
            return self._abort(prepared.request, prepared.request_seq, prepared.source.name,
                               "the source sealed a newer checkpoint after prepare", prepared.source_epoch,
                               checkpoint=prepared.checkpoint)
        # The history names the commit `acquire`, as a grant would (the checker pairs leases with it).
        history = Recorder(getattr(self.ownership, "_history", None), owner)
        result: HandoffCommit | None = None
        for _ in range(_LATE_SEAL_ATTEMPTS):
            version, catalog = placements_now(self.store, {prepared.target.name: prepared.target})
            judged = self._judge_on_catalog(prepared, catalog[prepared.target.name])
            if isinstance(judged, HandoffOutcome):
                return judged
            prepared = judged
            expected = prepared.source_epoch
            try:  # a LOGICAL move commits the state at the decision's schema (baton.handoff.transform)
                migrated = transformed_state(prepared.checkpoint, prepared.decision, self.blobs,
                                             owner_epoch=expected + 1)
            except BatonError as exc:
                return self._abort(prepared.request, prepared.request_seq, prepared.source.name,
                                   f"the schema transform failed: {exc}", expected, checkpoint=prepared.checkpoint)
            history.invoke("acquire", run_id, epoch=expected, value={"owner": owner, "observed_epoch": expected})
            try:
                result = self.store.commit_handoff(
                    run_id, owner=owner, ttl_s=self.lease_ttl_s, observed_epoch=expected,
                    expected_checkpoint_hash=prepared.checkpoint.checkpoint_hash, placement=prepared.target.name,
                    events=self._commit_events(prepared, owner, migrated), request_seq=prepared.request_seq,
                    checkpoint=migrated, catalog_version=version,
                )
            except BaseException as exc:
                history.info("acquire", run_id, epoch=expected, value={"owner": owner, "error": repr(exc)})
                raise
            if result.committed:
                break
            history.fail("acquire", run_id, epoch=expected, value={"owner": owner, "observed_epoch": expected,
                                                                   "refusal": str(result.refusal)})
            if result.refusal is HandoffRefusal.CATALOG_CHANGED:
                continue  # judge the target again on the catalog as it is now
            if result.refusal is not HandoffRefusal.NEWER_CHECKPOINT:
                return self._refused(prepared, result)
            # The source, still the rightful owner, sealed inside the commit window: judge the move on that.
            sealed_late = self.store.latest_checkpoint(run_id)
            assert sealed_late is not None
            regated = self._regate(prepared, sealed_late)
            if isinstance(regated, str):
                return self._abort(prepared.request, prepared.request_seq, prepared.source.name,
                                   f"{regated}; nothing was committed, the source keeps epoch {prepared.source_epoch}",
                                   prepared.source_epoch, checkpoint=sealed_late)
            prepared = regated
        if result is None or result.lease is None:
            return self._abort(prepared.request, prepared.request_seq, prepared.source.name,
                               "the source kept sealing a newer checkpoint (or the catalog kept changing) during "
                               "the commit", prepared.source_epoch,
                               checkpoint=prepared.checkpoint)
        lease = result.lease
        history.ok("acquire", run_id, epoch=lease.epoch, value={"owner": owner, "takeover": prepared.source_epoch > 0})
        fault_points.reached(KillPoint.COMMIT_TRANSFERRED)
        try:
            self.ownership.fence(run_id, lease.epoch, self.fence_targets)
        except Exception:  # noqa: BLE001 - committed; the adopting worker fences the targets before it starts
            log.warning("run %s: committed at epoch %d, but the targets could not be fenced now", run_id, lease.epoch,
                        exc_info=True)
        before = prepared.restored.parts.authority.level
        return HandoffOutcome(
            run_id=run_id,
            status=HandoffStatus.COMMITTED,
            reason=prepared.request.reason,
            source_placement=prepared.source.name,
            target_placement=prepared.target.name,
            checkpoint_id=prepared.checkpoint.checkpoint_id,
            source_epoch=prepared.source_epoch,
            target_epoch=lease.epoch,
            new_owner=owner,
            decision=prepared.decision,
            authority_before=before,
            authority_after=prepared.decision.authority_ceiling,
        )

    def _commit_events(self, prepared: PreparedHandoff, owner: str,
                       migrated: ExecutionCheckpoint | None = None) -> list[Event]:
        """What the commit records, in its transaction: the lease, the fence, the schema transform, the transfer."""
        run_id, new_epoch = prepared.request.run_id, prepared.source_epoch + 1
        before = prepared.restored.parts.authority.level
        after = prepared.decision.authority_ceiling
        previous = self.store.get_lease(run_id)
        return [
            self._event(
                EventType.LEASE_ACQUIRED, run_id, source_epoch=prepared.source_epoch, target_epoch=new_epoch,
                reason=f"handoff: {prepared.request.reason}",
                detail={"owner": owner,
                        "previous_owner": previous.owner if previous.epoch == prepared.source_epoch else None,
                        "coordinator": self.ownership.name, "forced": True, "fenced_targets": len(self.fence_targets),
                        "request_seq": prepared.request_seq},
            ),
            self._event(
                EventType.SOURCE_FENCED, run_id, checkpoint=prepared.checkpoint,
                source_placement=prepared.source.name, target_placement=prepared.target.name,
                source_epoch=prepared.source_epoch, target_epoch=new_epoch,
                reason="old epoch fenced by compare-and-set",
                detail={"request_seq": prepared.request_seq, "source_quiesced": prepared.source_quiesced},
            ),
            *([] if migrated is None else [self._event(
                EventType.SCHEMA_MIGRATED, run_id, checkpoint=migrated, source_placement=prepared.source.name,
                target_placement=prepared.target.name, source_epoch=prepared.source_epoch, target_epoch=new_epoch,
                reason=f"schema {prepared.checkpoint.schema_version} -> {migrated.schema_version} for "
                       f"{prepared.target.name}",
                detail={"request_seq": prepared.request_seq, "checkpoint_hash": migrated.checkpoint_hash,
                        "migrated_from_hash": prepared.checkpoint.checkpoint_hash,
                        "migration_ref": migrated.migration_ref},
            )]),
            self._event(
                EventType.OWNERSHIP_TRANSFERRED, run_id, checkpoint=prepared.checkpoint,
                source_placement=prepared.source.name, target_placement=prepared.target.name,
                source_epoch=prepared.source_epoch, target_epoch=new_epoch, reason=prepared.request.reason,
                decision=prepared.decision, authority_before=before.value, authority_after=after.value,
                detail={"request_seq": prepared.request_seq, "new_owner": owner,
                        "pending_operations": [op.operation_id for op in prepared.pending_operations]},
            ),
        ]

    def _refused(self, prepared: PreparedHandoff, result: HandoffCommit) -> HandoffOutcome:
        """The outcome of a commit the store refused for a reason other than a late seal."""
        request = prepared.request
        if result.refusal is HandoffRefusal.ALREADY_ANSWERED:  # e.g. `baton recover` aborted it: no second answer
            return HandoffOutcome(run_id=request.run_id, status=HandoffStatus.ABORTED, reason=request.reason,
                                  source_placement=prepared.source.name,
                                  checkpoint_id=prepared.checkpoint.checkpoint_id, source_epoch=prepared.source_epoch,
                                  abort_reason=f"the request was already answered ({result.detail})")
        why = ("the epoch moved during the handoff (another coordinator won)"
               if result.refusal is HandoffRefusal.EPOCH_MOVED else f"the run ended during the handoff ({result.detail})")
        return self._abort(request, prepared.request_seq, prepared.source.name, why, prepared.source_epoch,
                           checkpoint=prepared.checkpoint)

    # -- helpers ----------------------------------------------------------------------------

    def _regate(self, prepared: PreparedHandoff, checkpoint: ExecutionCheckpoint) -> PreparedHandoff | str:
        """`prepared` re-judged on a checkpoint the source sealed late; a string says why it cannot move."""
        run_id = prepared.request.run_id
        try:
            restored = restore(self.blobs, checkpoint, verify_artifact=True)
        except BatonError as exc:
            return f"the checkpoint sealed during the commit does not verify: {exc}"
        pending = outstanding_operations(self.store, run_id)
        judged = self._rejudge(prepared, restored, pending, prepared.target,
                               passed="late checkpoint re-judged", failed="late checkpoint refused")
        if isinstance(judged, PreparedHandoff):
            return judged
        return f"the checkpoint sealed during the commit cannot go to {prepared.target.name}"

    def _judge_on_catalog(self, prepared: PreparedHandoff, target: Placement) -> PreparedHandoff | HandoffOutcome:
        """`prepared` judged on the catalog's record of its target now: unchanged if the record did not change,
        re-judged if it did, or the abort (with the gate's reasons recorded) if the target no longer passes."""
        if target == prepared.target:
            return prepared
        judged = self._rejudge(prepared, prepared.restored, prepared.pending_operations, target,
                               passed="re-judged on the catalog at commit", failed="the catalog changed before the commit")
        if isinstance(judged, PreparedHandoff):
            return judged
        reasons = ", ".join(reason.value for reason in judged.blocking_reasons)
        return self._abort(prepared.request, prepared.request_seq, prepared.source.name,
                           f"the catalog changed before the commit: {target.name} can no longer take the run "
                           f"({reasons}); nothing was committed", prepared.source_epoch, checkpoint=prepared.checkpoint)

    def _rejudge(
        self, prepared: PreparedHandoff, restored: RestoredRun, pending: tuple[OutstandingOperation, ...],
        target: Placement, *, passed: str, failed: str,
    ) -> PreparedHandoff | HandoffDecision:
        """The gate on `restored` for `target`, recorded: the re-judged move, or the refusing decision."""
        run_id, checkpoint = prepared.request.run_id, restored.checkpoint
        now = self.store.db_now()
        decision = judge_placement(restored, target, self.policy, now=now, has_unresolved_operations=bool(pending))
        self._append([self._event(
            EventType.COMPATIBILITY_PASSED if decision.allowed else EventType.COMPATIBILITY_FAILED, run_id, at=now,
            checkpoint=checkpoint, reason=passed if decision.allowed else failed,
            source_placement=prepared.source.name, target_placement=target.name, source_epoch=prepared.source_epoch,
            decision=decision, detail={"request_seq": prepared.request_seq},
        )])
        if not decision.allowed:
            return decision
        return PreparedHandoff(
            request=prepared.request, request_seq=prepared.request_seq, checkpoint=checkpoint, restored=restored,
            source_epoch=prepared.source_epoch, source=prepared.source, target=target, decision=decision,
            pending_operations=pending, source_quiesced=prepared.source_quiesced,
        )

    def _escalate_if_stranded(
        self, request: HandoffRequest, request_seq: int, source: str | None, lease: Lease,
        restored: RestoredRun, now: dt.datetime, refusals: Mapping[str, list[str]], *, before: Sequence[Event],
    ) -> HandoffOutcome | None:
        """Escalate an unowned run that no placement can take, once the first such refusal since it last had an
        owner is `stranded_after_s` old. The refusal, the escalation (with every placement's reasons), the answer
        to the request and an ESCALATED checkpoint holding the store's budget ledger (`escalate_sealing_ledger`)
        commit with the fencing of the old epoch; None while the wait lasts or if the lease or the run moved."""
        checkpoint = restored.checkpoint
        since = self._stranded_since(request.run_id)
        if since is None or (now - since).total_seconds() < self.stranded_after_s:
            return None
        why = (f"nobody holds the run and no placement can take it: refused everywhere since {since.isoformat()} "
               f"({self.stranded_after_s:g} s allowed)")
        common = {"request_seq": request_seq}
        escalated = self._event(
            EventType.RUN_ESCALATED, request.run_id, at=now, checkpoint=checkpoint, reason=why,
            source_placement=source, source_epoch=lease.epoch,
            detail={**common, "refusals": dict(refusals), "stranded_since": since.isoformat(),  # type: ignore[dict-item]
                    "stranded_after_s": self.stranded_after_s, "coordinator": self.ownership.name},
        )
        aborted = self._event(
            EventType.HANDOFF_ABORTED, request.run_id, at=now, checkpoint=checkpoint, reason=why, source_placement=source,
            source_epoch=lease.epoch, detail={**common, "requested_for": request.reason},
        )

        def events(final: ExecutionCheckpoint) -> list[Event]:
            sealed = self._event(
                EventType.CHECKPOINT_SEALED, request.run_id, at=now, checkpoint=final, source_placement=source,
                source_epoch=final.owner_epoch, reason="sealed at escalation, with the budget the store recorded",
                detail={**common, "checkpoint_hash": final.checkpoint_hash, "owner": self.ownership.name},
            )
            return [*before, escalated, aborted, sealed]

        epoch = escalate_sealing_ledger(self.store, self.blobs, restored, observed_epoch=lease.epoch, at=now,
                                        events=events)
        if epoch is None:
            return None
        try:
            self.ownership.fence(request.run_id, epoch, self.fence_targets)
        except Exception:  # noqa: BLE001 - escalated and fenced at the store; a late owner's seal is refused there
            log.warning("run %s: escalated at epoch %d, but the targets could not be fenced now", request.run_id, epoch,
                        exc_info=True)
        return HandoffOutcome(run_id=request.run_id, status=HandoffStatus.ABORTED, reason=request.reason,
                              source_placement=source, checkpoint_id=checkpoint.checkpoint_id, source_epoch=lease.epoch,
                              target_epoch=epoch, abort_reason=why)

    def _stranded_since(self, run_id: str) -> dt.datetime | None:
        """When a prepare first found no compatible target for the run, nobody holding it, since it last got an
        owner (a refusal while its owner still ran does not count), if one has."""
        since: dt.datetime | None = None
        for _, event in self.store.list_events(
                run_id=run_id, event_types=[EventType.LEASE_ACQUIRED, EventType.COMPATIBILITY_FAILED]):
            if event.event_type is EventType.LEASE_ACQUIRED:
                since = None
            elif since is None and event.reason == _NO_TARGET and event.detail.get("unowned") is True:
                since = event.at
        return since

    def _reserve_to_record_end(
        self, request: HandoffRequest, request_seq: int, source: str | None, lease: Lease,
        checkpoint: ExecutionCheckpoint, placement: Placement,
    ) -> HandoffOutcome:
        """The run ended (a terminal checkpoint) but its owner lapsed before recording that: nothing resumes, so
        the gate has nothing to judge. Reserve it again for its placement at a new epoch (targets fenced) so a
        worker there adopts it and records the end, and answer the request with an abort."""
        granted = self.ownership.grant(
            request.run_id, self.owner_for(placement), ttl_s=self.lease_ttl_s, observed_epoch=lease.epoch,
            fence_targets=self.fence_targets,
            reason=f"ended at {checkpoint.boundary.value} but not recorded: reserved for {placement.name}",
        )
        why = (f"the run already ended at {checkpoint.boundary.value}: reserved again for {placement.name} "
               f"at epoch {granted.epoch} to record its end" if granted is not None
               else "the run already ended; the lease moved meanwhile")
        return self._abort(request, request_seq, source, why, lease.epoch, checkpoint=checkpoint)

    def _abort(
        self, request: HandoffRequest, request_seq: int, source: str | None, why: str, epoch: int,
        *, checkpoint: ExecutionCheckpoint | None = None, at: dt.datetime | None = None, before: Sequence[Event] = (),
    ) -> HandoffOutcome:
        """Record the abort (after `before`, the phase's findings, in the same transaction)."""
        self._append([*before, self._event(
            EventType.HANDOFF_ABORTED, request.run_id, at=at, checkpoint=checkpoint, reason=why, source_placement=source,
            source_epoch=epoch, detail={"request_seq": request_seq, "requested_for": request.reason},
        )])
        return HandoffOutcome(
            run_id=request.run_id,
            status=HandoffStatus.ABORTED,
            reason=request.reason,
            source_placement=source,
            checkpoint_id=None if checkpoint is None else checkpoint.checkpoint_id,
            source_epoch=epoch,
            abort_reason=why,
        )

    def _event(
        self,
        event_type: EventType,
        run_id: str,
        *,
        at: dt.datetime | None = None,
        checkpoint: ExecutionCheckpoint | None = None,
        decision: HandoffDecision | None = None,
        **fields: object,
    ) -> Event:
        """An event of this handoff. Without `at` it is stamped with the database clock when appended."""
        if checkpoint is not None:
            fields.setdefault("checkpoint_id", checkpoint.checkpoint_id)
            fields.setdefault("release_id", checkpoint.release_id)
            fields.setdefault("state_schema", checkpoint.schema_version)
            fields.setdefault("resume_boundary", checkpoint.boundary.value)
        if decision is not None:
            fields["compatibility_decision"] = decision.model_dump(mode="json")
        return Event(event_type=event_type, run_id=run_id, at=at or _UNSTAMPED, **fields)  # type: ignore[arg-type]

    def _append(self, events: Sequence[Event]) -> list[int]:
        """Append `events` in one transaction; those built without a time get the database clock's."""
        stamp = any(event.at == _UNSTAMPED for event in events)
        if stamp and not all(event.at == _UNSTAMPED for event in events):
            raise ValueError("a batch of handoff events is stamped by the database clock or carries its times, not both")
        return self.store.append_events(events, stamp=stamp)
