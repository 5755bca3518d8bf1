"""Finishing or undoing a move left half done, by anyone: `baton recover`, the Dagster lease sensor's job, a test.

A move has durable steps (prepare, commit, adopt, restore, the first resumed
checkpoint) and whoever was taking one may die in between
(`baton.fault_points` names every gap). From the store and the event log alone,
`classify` recognises three half-done states of an active run:

* PREPARED:  a handoff request older than the deadline that nobody answered
             (no transfer, no abort): the coordinator died before its commit.
             Undone: HANDOFF_ABORTED is recorded (only if the request is still
             open, under the lease row lock, so a late commit and the abort
             cannot both land); a quiesced source sees the abort and goes on.
* COMMITTED: the run is reserved for a placement (`placement:<name>`) and the
             reservation lapsed by the database clock with nobody adopting it.
             Finished: reserved again at a new epoch, targets fenced at it.
* ADOPTED:   a worker took the epoch and its lease lapsed before it confirmed
             a resumed checkpoint (no RESUME_VERIFIED / REVALIDATION_FAILED at
             that epoch): it died adopting, restoring or before confirming.
             Finished: re-reserved for the run's placement at a new epoch, so
             another worker there adopts, restores and confirms.

Every action is a compare-and-set on what was read, so running recovery twice,
or beside a live coordinator, does nothing the second time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from baton.fencing import FenceAware
from baton.models import Event, EventType
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.store.records import Lease, RunRecord

RESERVED_PREFIX = "placement:"
DEFAULT_PREPARE_DEADLINE_S = 60.0
"""A request unanswered this long is abandoned: well past a quiesce wait and a commit."""
DEFAULT_RESERVATION_TTL_S = 30.0
_MAX_ROUNDS = 8  # a run can need several actions (an old request to abort, then a lapsed lease)

_TRAIL = (EventType.HANDOFF_REQUESTED, EventType.HANDOFF_ABORTED, EventType.OWNERSHIP_TRANSFERRED,
          EventType.RESUME_VERIFIED, EventType.REVALIDATION_FAILED)


class Stage(StrEnum):
    """How far a half-done move got."""

    PREPARED = "prepared"
    COMMITTED = "committed"
    ADOPTED = "adopted"


class Action(StrEnum):
    ABORTED = "aborted"
    RE_RESERVED = "re-reserved"
    NONE = "none"  # someone else acted first; nothing was written


@dataclass(frozen=True)
class HalfDoneMove:
    """One half-done move found in the store."""

    run_id: str
    stage: Stage
    epoch: int
    placement: str | None
    owner: str | None
    since: dt.datetime | None
    request_seq: int | None = None
    request_reason: str = ""


@dataclass(frozen=True)
class Recovery:
    """What recovery did about one half-done move."""

    move: HalfDoneMove
    action: Action
    detail: str
    epoch_after: int


def reserved_placement(owner: str | None) -> str | None:
    """The placement a reservation owner names (`placement:<name>`), else None."""
    return owner[len(RESERVED_PREFIX):] if owner and owner.startswith(RESERVED_PREFIX) else None


def classify(
    run: RunRecord,
    lease: Lease,
    trail: Sequence[tuple[int, Event]],
    *,
    now: dt.datetime,
    prepare_deadline_s: float = DEFAULT_PREPARE_DEADLINE_S,
) -> HalfDoneMove | None:
    """The half-done move of `run`, if any: a plain decision on its lease, its handoff trail and the database time.

    `trail` holds the run's HANDOFF_REQUESTED, HANDOFF_ABORTED,
    OWNERSHIP_TRANSFERRED, RESUME_VERIFIED and REVALIDATION_FAILED events in
    seq order. The oldest abandoned request comes first; a lapsed lease next.
    """
    if run.status != "active":
        return None
    answered = {e.detail.get("request_seq") for _, e in trail
                if e.event_type in (EventType.HANDOFF_ABORTED, EventType.OWNERSHIP_TRANSFERRED)}
    deadline = now - dt.timedelta(seconds=prepare_deadline_s)
    for seq, e in trail:
        if e.event_type is EventType.HANDOFF_REQUESTED and seq not in answered and e.at <= deadline:
            return HalfDoneMove(run.run_id, Stage.PREPARED, lease.epoch, run.placement, lease.owner, e.at,
                                request_seq=seq, request_reason=e.reason or "")
    if lease.owner is None or lease.held_at(now):
        return None  # held, or given up on purpose (a stopped worker): not a half-done move
    reserved = reserved_placement(lease.owner)
    if reserved is not None:
        return HalfDoneMove(run.run_id, Stage.COMMITTED, lease.epoch, reserved, lease.owner, lease.expires_at)
    confirmed = any(e.event_type in (EventType.RESUME_VERIFIED, EventType.REVALIDATION_FAILED)
                    and e.target_epoch == lease.epoch for _, e in trail)
    if confirmed:
        return None  # a worker that died mid-run: a plain lapsed lease, handed off by the fleet or the sensor
    return HalfDoneMove(run.run_id, Stage.ADOPTED, lease.epoch, run.placement, lease.owner, lease.expires_at)


def find_half_done(
    store: SqlStore,
    *,
    run_ids: Iterable[str] | None = None,
    prepare_deadline_s: float = DEFAULT_PREPARE_DEADLINE_S,
) -> list[HalfDoneMove]:
    """Every half-done move among the active runs (or `run_ids`), judged at the database's current time."""
    now = store.db_now()
    runs = [store.get_run(r) for r in run_ids] if run_ids is not None else store.list_runs(status="active")
    found = []
    for run in runs:
        move = classify(run, store.get_lease(run.run_id), store.list_events(run_id=run.run_id, event_types=_TRAIL),
                        now=now, prepare_deadline_s=prepare_deadline_s)
        if move is not None:
            found.append(move)
    return found


def recover_move(
    store: SqlStore,
    move: HalfDoneMove,
    *,
    fence_targets: Sequence[FenceAware] = (),
    reservation_ttl_s: float = DEFAULT_RESERVATION_TTL_S,
    recovered_by: str = "baton recover",
) -> Recovery:
    """Finish or undo `move`, recording what was done; Action.NONE if the store moved on meanwhile."""
    if move.stage is Stage.PREPARED:
        assert move.request_seq is not None
        abort = Event(
            event_type=EventType.HANDOFF_ABORTED, run_id=move.run_id, at=store.db_now(),
            source_placement=move.placement, source_epoch=move.epoch,
            reason=f"recovered: the request stayed unanswered since {move.since:%H:%M:%S} (the coordinator stopped "
                   f"before its commit); the source keeps epoch {move.epoch}",
            detail={"request_seq": move.request_seq, "requested_for": move.request_reason,
                    "recovered_by": recovered_by, "recovery": move.stage.value},
        )
        seqs = store.abort_open_handoff(move.run_id, move.request_seq, [abort])
        if seqs is None:
            return Recovery(move, Action.NONE, "the request was answered meanwhile", store.current_epoch(move.run_id))
        return Recovery(move, Action.ABORTED, f"request {move.request_seq} aborted", move.epoch)
    placement = move.placement
    if placement is None:
        return Recovery(move, Action.NONE, "the run names no placement to reserve it for", move.epoch)
    why = ("the reservation lapsed and no worker adopted it" if move.stage is Stage.COMMITTED
           else f"{move.owner} lapsed before confirming a resumed checkpoint")
    lease = Coordinator(store, name=recovered_by).grant(
        move.run_id, RESERVED_PREFIX + placement, ttl_s=reservation_ttl_s, observed_epoch=move.epoch,
        fence_targets=fence_targets, reason=f"recovered ({move.stage.value}): re-reserved for {placement}: {why}",
    )
    if lease is None:
        return Recovery(move, Action.NONE, "the lease moved meanwhile", store.current_epoch(move.run_id))
    return Recovery(move, Action.RE_RESERVED, f"reserved for {placement} at epoch {lease.epoch}: {why}", lease.epoch)


def recover(
    store: SqlStore,
    *,
    run_ids: Iterable[str] | None = None,
    fence_targets: Sequence[FenceAware] = (),
    prepare_deadline_s: float = DEFAULT_PREPARE_DEADLINE_S,
    reservation_ttl_s: float = DEFAULT_RESERVATION_TTL_S,
    recovered_by: str = "baton recover",
    stages: Collection[Stage] = tuple(Stage),
) -> list[Recovery]:
    """Find every half-done move (of the given `stages`) and finish or undo it; idempotent.

    A second call finds nothing to do. The lease-expiry handoff job recovers
    only PREPARED moves (undoing an abandoned request), then hands the run on
    itself, which finishes a COMMITTED or ADOPTED move by another route.
    """
    done: list[Recovery] = []
    pending = list(run_ids) if run_ids is not None else None
    for _ in range(_MAX_ROUNDS):
        found = [move for move in find_half_done(store, run_ids=pending, prepare_deadline_s=prepare_deadline_s)
                 if move.stage in stages]
        acted = [recover_move(store, move, fence_targets=fence_targets, reservation_ttl_s=reservation_ttl_s,
                              recovered_by=recovered_by) for move in found]
        done.extend(acted)
        if not any(r.action is not Action.NONE for r in acted):
            break
        pending = [r.move.run_id for r in acted]
    return done

