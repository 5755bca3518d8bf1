"""A handoff's commit and a recovered abort, each in one transaction under the run's lease row lock.

`commit_handoff` is the whole commit of a move: the compare-and-set on the
epoch, the run's new placement and the events that record the fence, the lease
and the transfer, all or nothing. Under the same lock it checks that the run is
still active, that no newer checkpoint was sealed since prepare (a seal locks
the same row, so none can slip in before the commit either), that the
handoff request has not been answered already (an abort by `baton recover`)
and, when the caller judged the move at a catalog version, that the catalog is
still at that version (read under the event append lock every catalog change
takes first, so no change can commit between that check and the commit).
`abort_open_handoff` is recovery's side of that race: it answers a request
only if nobody has. `escalate_unowned_in` ends a run nobody holds (the
coordinator found no placement that can take it), fencing its epoch, inside
the transaction that seals its last checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from baton.ablation import Ablation, is_ablated
from baton.errors import RecordNotFoundError, StoreError
from baton.models import Event, EventType, ExecutionCheckpoint
from baton.store.catalog_sql import CATALOG_VERSION_SQL
from baton.store.core import StoreCore, Tx
from baton.store.dialect import check_duration
from baton.store.records import Lease
from baton.store.runs_sql import EVENT_SELECT, event_of

_ANSWERS = (EventType.OWNERSHIP_TRANSFERRED.value, EventType.HANDOFF_ABORTED.value)


class HandoffRefusal(StrEnum):
    """Why `commit_handoff` changed nothing."""

    EPOCH_MOVED = "epoch_moved"
    NEWER_CHECKPOINT = "newer_checkpoint"
    RUN_NOT_ACTIVE = "run_not_active"
    ALREADY_ANSWERED = "already_answered"
    CATALOG_CHANGED = "catalog_changed"


@dataclass(frozen=True)
class HandoffCommit:
    """What `commit_handoff` did: the new lease and the event seqs, or why it refused."""

    lease: Lease | None
    seqs: tuple[int, ...] = ()
    refusal: HandoffRefusal | None = None
    detail: str = ""

    @property
    def committed(self) -> bool:
        return self.lease is not None


class HandoffSql(StoreCore):
    """The atomic commit of a handoff and the guarded abort of a half-done one."""

    def _answer_of(self, tx: Tx, run_id: str, request_seq: int) -> str | None:
        """The event type that already answered handoff request `request_seq`, if any."""
        rows = tx.rows(self.with_packed(
            tx, f"SELECT {EVENT_SELECT} FROM events WHERE run_id = ? AND seq > ? AND event_type IN (?, ?) ORDER BY seq"),
            (run_id, request_seq, *_ANSWERS),
        )
        for _seq, event_type, *rest in rows:
            if event_of(self.dialect, event_type, *rest).detail.get("request_seq") == request_seq:
                return str(event_type)
        return None

    def _catalog_version(self, tx: Tx) -> int:
        """The catalog's version, read after taking the lock every catalog change takes first (PostgreSQL; SQLite's
        write transaction excludes other writers already)."""
        tx.take_append_lock()  # a statement of its own: the version read must see the last holder's change
        row = tx.one(CATALOG_VERSION_SQL)
        return int(row[0]) if row else 0

    def commit_handoff(
        self,
        run_id: str,
        *,
        owner: str,
        ttl_s: float,
        observed_epoch: int,
        expected_checkpoint_hash: str,
        placement: str,
        events: Sequence[Event],
        request_seq: int | None = None,
        checkpoint: ExecutionCheckpoint | None = None,
        catalog_version: int | None = None,
    ) -> HandoffCommit:
        """Move the run to `placement` under `owner` at epoch observed+1, with `events`, in one transaction.

        Refuses (nothing written) when the epoch is no longer `observed_epoch`,
        the latest checkpoint is not `expected_checkpoint_hash`, the run is not
        active, request `request_seq` was already answered, or the catalog is no
        longer at `catalog_version` (the move was judged on an older one). The events are
        stamped with the database clock; any `target_epoch` they name must be
        observed+1 (StoreError otherwise, before anything is written).
        `checkpoint` (a schema transform's migrated state, `baton.handoff.transform`) is sealed in the same
        transaction as the run's next checkpoint after `expected_checkpoint_hash`, at epoch observed+1: it
        exists exactly when the move committed.
        """
        if not owner:
            raise StoreError("lease owner must not be empty")
        new_epoch = observed_epoch + 1
        wrong = [e.event_type.value for e in events if e.target_epoch is not None and e.target_epoch != new_epoch]
        if wrong:
            raise StoreError(f"handoff events {wrong} name a target epoch other than {new_epoch}")
        duration = self.dialect.duration_param(check_duration(ttl_s))
        prepared = self._event_rows(events)  # type: ignore[attr-defined]  # RunsSql, in SqlStore
        if checkpoint is not None and (checkpoint.run_id, checkpoint.owner_epoch) != (run_id, new_epoch):
            raise StoreError(f"checkpoint {checkpoint.checkpoint_id} is not run {run_id!r}'s at epoch {new_epoch}")
        body = None if checkpoint is None else self._sealed_body(checkpoint)  # type: ignore[attr-defined]
        check_epoch = not is_ablated(Ablation.STORE_CLAIM_EPOCH)
        with self._tx() as tx:
            head = tx.one(
                "SELECT l.epoch, r.status, (SELECT c.checkpoint_hash FROM checkpoints c WHERE c.run_id = l.run_id "
                "ORDER BY c.seq DESC LIMIT 1) FROM leases l JOIN runs r ON r.run_id = l.run_id "
                "WHERE l.run_id = ? {for_update_lease}",
                (run_id,),
            )
            if head is None:
                raise RecordNotFoundError(f"run {run_id!r} is not in the store")
            epoch, status, latest = int(head[0]), str(head[1]), head[2]
            if check_epoch and epoch != observed_epoch:
                return HandoffCommit(None, refusal=HandoffRefusal.EPOCH_MOVED,
                                     detail=f"epoch is {epoch}, the move was prepared at {observed_epoch}")
            if status != "active":
                return HandoffCommit(None, refusal=HandoffRefusal.RUN_NOT_ACTIVE, detail=f"run is {status}")
            if latest != expected_checkpoint_hash:
                return HandoffCommit(None, refusal=HandoffRefusal.NEWER_CHECKPOINT,
                                     detail=f"latest checkpoint is {latest}, the move was prepared on "
                                            f"{expected_checkpoint_hash}")
            if request_seq is not None and (answer := self._answer_of(tx, run_id, request_seq)) is not None:
                return HandoffCommit(None, refusal=HandoffRefusal.ALREADY_ANSWERED,
                                     detail=f"request {request_seq} was answered by {answer}")
            if catalog_version is not None and (now_at := self._catalog_version(tx)) != catalog_version:
                return HandoffCommit(None, refusal=HandoffRefusal.CATALOG_CHANGED,
                                     detail=f"the catalog is at seq {now_at}, the move was judged at {catalog_version}")
            row = tx.one(
                "UPDATE leases SET owner = ?, epoch = ?, expires_at = {now_plus}, updated_at = {now} "
                "WHERE run_id = ? RETURNING run_id, owner, epoch, expires_at",
                (owner, epoch + 1, duration, run_id),
            )
            assert row is not None
            tx.send("UPDATE runs SET placement = ?, updated_at = {now} WHERE run_id = ?", (placement, run_id))
            if checkpoint is not None:  # CheckpointsSql, in SqlStore: chained after the expected checkpoint
                self._append_in(tx, checkpoint, body)  # type: ignore[attr-defined]
            seqs = self._insert_events(tx, prepared, stamp=True)  # type: ignore[attr-defined]
        lease = Lease(run_id=row[0], owner=row[1], epoch=int(row[2]), expires_at=self.dialect.ts_out(row[3]))
        return HandoffCommit(lease, seqs=tuple(seqs))

    def abort_open_handoff(self, run_id: str, request_seq: int, events: Sequence[Event]) -> list[int] | None:
        """Append `events` (the abort) only if request `request_seq` is still unanswered; None if it was answered.

        Runs under the run's lease row lock, as `commit_handoff` does, so a
        request ends with exactly one answer whichever of the two comes first.
        The events are stamped with the database clock.
        """
        prepared = self._event_rows(events)  # type: ignore[attr-defined]
        with self._tx() as tx:
            if tx.one("SELECT epoch FROM leases WHERE run_id = ? {for_update}", (run_id,)) is None:
                raise RecordNotFoundError(f"run {run_id!r} is not in the store")
            if self._answer_of(tx, run_id, request_seq) is not None:
                return None
            return self._insert_events(tx, prepared, stamp=True)  # type: ignore[attr-defined]

    @staticmethod
    def escalate_unowned_in(tx: Tx, run_id: str, *, observed_epoch: int) -> int | None:
        """Escalate an active run nobody holds at `observed_epoch`, inside `tx` (the caller's seal of its last
        checkpoint, `baton.handoff.escalation`): the lease moves to epoch observed+1 with no owner, so the old
        epoch is fenced at the store. Returns that epoch, or None, having written nothing, when the epoch moved,
        someone holds the lease or the run is not active."""
        head = tx.one(
            "SELECT l.epoch, CASE WHEN l.owner IS NOT NULL AND l.expires_at > {now} THEN 1 ELSE 0 END, r.status "
            "FROM leases l JOIN runs r ON r.run_id = l.run_id WHERE l.run_id = ? {for_update_lease}",
            (run_id,),
        )
        if head is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")
        epoch, held, status = int(head[0]), int(head[1]), str(head[2])
        if epoch != observed_epoch or held or status != "active":
            return None
        tx.rows("UPDATE leases SET owner = NULL, expires_at = NULL, epoch = ?, updated_at = {now} WHERE run_id = ?",
                (epoch + 1, run_id))
        tx.rows("UPDATE runs SET status = 'escalated', updated_at = {now} WHERE run_id = ?", (run_id,))
        return epoch + 1
