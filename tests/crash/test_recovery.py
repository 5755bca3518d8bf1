"""`baton.handoff.recovery`: the decision (a plain function) and each action on a real store, both backends.

The half-done states are made by running the real coordinator and resume code
up to the step a crash would stop at (no SIGKILL here: `test_kill_points`
does that to live processes).
"""

from __future__ import annotations

import datetime as dt

from baton.handoff import HandoffCoordinator, HandoffRequest, PreparedHandoff, prepare_resume
from baton.handoff.recovery import Action, Stage, classify, find_half_done, recover
from baton.models import Boundary, Event, EventType, RunKind
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.records import Lease, RunRecord

from builders.handoff import PEER, SOURCE, events, seed_run
from builders.live import wait_for

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)


def _run(status: str = "active") -> RunRecord:
    return RunRecord(run_id="r", kind=RunKind.DEPLOY, release_id="rel", placement="eu-b", status=status,
                     created_at=T0, updated_at=T0)


def _lease(owner: str | None, epoch: int = 2, expires_in_s: float | None = -1.0) -> Lease:
    expires = None if expires_in_s is None else T0 + dt.timedelta(seconds=expires_in_s)
    return Lease(run_id="r", owner=owner, epoch=epoch, expires_at=expires)


def _ev(event_type: EventType, ago_s: float = 0.0, **fields: object) -> Event:
    return Event(event_type=event_type, run_id="r", at=T0 - dt.timedelta(seconds=ago_s), **fields)  # type: ignore[arg-type]


def test_classify_decides_from_lease_trail_and_database_time() -> None:
    held = _lease("worker:w1.0", expires_in_s=5)
    old_request = [(10, _ev(EventType.HANDOFF_REQUESTED, ago_s=120, reason="gpu_reclaimed"))]
    assert classify(_run(), held, [], now=T0) is None
    move = classify(_run(), held, old_request, now=T0, prepare_deadline_s=60)
    assert move is not None and (move.stage, move.request_seq, move.request_reason) == (Stage.PREPARED, 10, "gpu_reclaimed")
    assert classify(_run(), held, [(10, _ev(EventType.HANDOFF_REQUESTED, ago_s=5))], now=T0, prepare_deadline_s=60) is None
    answered = [*old_request, (11, _ev(EventType.HANDOFF_ABORTED, detail={"request_seq": 10}))]
    assert classify(_run(), held, answered, now=T0) is None
    assert classify(_run("verified"), held, old_request, now=T0) is None

    lapsed_reservation = classify(_run(), _lease("placement:eu-b"), [], now=T0)
    assert lapsed_reservation is not None and (lapsed_reservation.stage, lapsed_reservation.placement) == (
        Stage.COMMITTED, "eu-b")
    assert classify(_run(), _lease("placement:eu-b", expires_in_s=5), [], now=T0) is None

    adopted = classify(_run(), _lease("worker:w2.0"), [], now=T0)
    assert adopted is not None and (adopted.stage, adopted.owner, adopted.epoch) == (Stage.ADOPTED, "worker:w2.0", 2)
    confirmed = [(12, _ev(EventType.RESUME_VERIFIED, target_epoch=2))]
    assert classify(_run(), _lease("worker:w2.0"), confirmed, now=T0) is None
    earlier_confirm = [(12, _ev(EventType.RESUME_VERIFIED, target_epoch=1))]
    assert classify(_run(), _lease("worker:w2.0"), earlier_confirm, now=T0) is not None
    assert classify(_run(), _lease(None, expires_in_s=None), [], now=T0) is None  # released on purpose


def _mover(store: SqlStore, blobs: BlobStore, ttl_s: float = 30.0) -> HandoffCoordinator:
    return HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, PEER)}, quiesce_timeout_s=0.1,
                              lease_ttl_s=ttl_s)


def test_an_abandoned_prepare_is_aborted_once_and_a_late_commit_is_refused(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator = _mover(store, blobs)
    prepared = coordinator.prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)  # ... and the coordinator "dies" here
    assert find_half_done(store, prepare_deadline_s=3600) == []  # not abandoned yet
    done = recover(store, prepare_deadline_s=0)
    assert [(r.move.run_id, r.move.stage, r.action) for r in done] == [(run.run_id, Stage.PREPARED, Action.ABORTED)]
    (abort,) = events(store, run.run_id, EventType.HANDOFF_ABORTED)
    assert abort.detail["request_seq"] == prepared.request_seq and abort.detail["recovered_by"] == "baton recover"
    assert recover(store, prepare_deadline_s=0) == []  # idempotent

    late = coordinator.commit(prepared)  # the coordinator was only slow: its commit must not land now
    assert not late.committed and "already answered" in (late.abort_reason or "")
    assert (store.get_lease(run.run_id).owner, store.current_epoch(run.run_id)) == ("source-worker", 1)
    assert len(events(store, run.run_id, EventType.HANDOFF_ABORTED)) == 1
    assert not events(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED)


def test_a_lapsed_reservation_is_renewed_at_a_new_epoch(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    outcome = _mover(store, blobs, ttl_s=0.3).handoff(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert outcome.committed and outcome.target_epoch == 2
    wait_for(lambda: find_half_done(store) or None, timeout_s=10, what="the reservation to lapse")
    (done,) = recover(store, reservation_ttl_s=30)
    assert (done.move.stage, done.action, done.epoch_after) == (Stage.COMMITTED, Action.RE_RESERVED, 3)
    lease = store.get_lease(run.run_id)
    assert (lease.owner, lease.epoch) == (f"placement:{PEER.name}", 3)
    last = events(store, run.run_id, EventType.LEASE_ACQUIRED)[-1]
    assert last.target_epoch == 3 and "recovered (committed)" in (last.reason or "")
    assert recover(store) == []


def test_an_adopter_that_lapsed_before_confirming_is_replaced(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    outcome = _mover(store, blobs).handoff(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert outcome.committed and outcome.target_epoch is not None
    adopter = Coordinator(store, name="w2")
    lease = adopter.grant(run.run_id, "worker:w2.0", ttl_s=0.3, observed_epoch=outcome.target_epoch, force=True)
    assert lease is not None
    prepare_resume(store, blobs, run.run_id, placement=PEER, epoch=lease.epoch)  # restored, then "killed"
    wait_for(lambda: find_half_done(store) or None, timeout_s=10, what="the adopter's lease to lapse")
    (done,) = recover(store)
    assert (done.move.stage, done.move.owner, done.action) == (Stage.ADOPTED, "worker:w2.0", Action.RE_RESERVED)
    assert store.get_lease(run.run_id).owner == f"placement:{PEER.name}"
    # Another worker of the placement adopts the renewed reservation and resumes.
    again = adopter.grant(run.run_id, "worker:w2.1", ttl_s=30, observed_epoch=done.epoch_after, force=True)
    assert again is not None and again.epoch == done.epoch_after + 1
    plan = prepare_resume(store, blobs, run.run_id, placement=PEER, epoch=again.epoch)
    assert plan.epoch == again.epoch
    assert recover(store) == []  # held by a live adopter: nothing to do



def test_the_handoff_job_s_recovery_undoes_only_an_abandoned_request(store: SqlStore, blobs: BlobStore) -> None:
    """What `pipelines.jobs.hand_off` asks for: PREPARED only (its own handoff finishes a lapsed lease)."""
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED, ttl_s=0.3)
    prepared = _mover(store, blobs).prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    wait_for(lambda: store.get_lease(run.run_id).expires_at < store.db_now() or None, timeout_s=10,
             what="the source's lease to lapse")
    (done,) = recover(store, run_ids=[run.run_id], prepare_deadline_s=0, stages=(Stage.PREPARED,))
    assert (done.move.stage, done.action) == (Stage.PREPARED, Action.ABORTED)
    assert store.get_lease(run.run_id).owner == "source-worker"  # the lapsed lease is left to the handoff
    assert [m.stage for m in find_half_done(store, prepare_deadline_s=0)] == [Stage.ADOPTED]
