"""Quiescing a live source through the event log.

The coordinator records HANDOFF_REQUESTED. A live worker notices it at its
next semantic boundary, seals a checkpoint, records SOURCE_QUIESCED naming it,
and then makes no further progress on the run until the handoff commits
(OWNERSHIP_TRANSFERRED: it drops the run) or aborts (HANDOFF_ABORTED: it goes
on). Every message is an append-only event, so the protocol needs nothing but
the store both sides already share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from baton import clock

from baton.models import Event, EventType
from baton.store.base import SqlStore
from baton.store.core import Row, Tx
from baton.store.runs_sql import event_of


@dataclass(frozen=True)
class QuiesceSignal:
    """A handoff request a worker must answer: its event seq and reason."""

    run_id: str
    request_seq: int
    reason: str


def pending_handoff_request(store: SqlStore, run_id: str, *, after_seq: int = 0) -> QuiesceSignal | None:
    """The newest unanswered handoff request of a run after `after_seq`, if any."""
    events = store.list_events(
        run_id=run_id,
        after_seq=after_seq,
        event_types=[EventType.HANDOFF_REQUESTED, EventType.SOURCE_QUIESCED, EventType.HANDOFF_ABORTED,
                     EventType.OWNERSHIP_TRANSFERRED],
    )
    pending: QuiesceSignal | None = None
    for seq, event in events:
        if event.event_type is EventType.HANDOFF_REQUESTED:
            pending = QuiesceSignal(run_id=run_id, request_seq=seq, reason=event.reason or "")
        elif pending is not None and event.detail.get("request_seq") == pending.request_seq:
            pending = None
    return pending


_WATCHED_TYPES = (EventType.HANDOFF_REQUESTED, EventType.SOURCE_QUIESCED, EventType.HANDOFF_ABORTED,
                  EventType.OWNERSHIP_TRANSFERRED)
_WATCH_SQL = (
    "WITH hi AS (SELECT MAX(seq) AS m FROM events WHERE run_id = ?) "
    "SELECT hi.m, e.seq, e.event_type, e.run_id, e.at, e.body, {packed} FROM hi "
    "LEFT JOIN events e ON e.run_id = ? AND e.seq > ? AND e.seq <= hi.m "
    "AND e.event_type IN (" + ", ".join("?" for _ in _WATCHED_TYPES) + ") ORDER BY e.seq"
)


class HandoffWatch:
    """`pending_handoff_request` for one run, kept up to date incrementally.

    Each check reads only the run's events after the highest seq it has already
    folded in (one indexed statement that also returns the run's highest seq),
    so a boundary costs O(new events), not a scan of the run's log from seq 0.
    The fold is the same as `pending_handoff_request`'s: the newest request
    stays pending until an answer (quiesced, aborted, transferred) names its seq.
    Seq order is commit order in the store, so no event can appear later below
    the mark.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.mark = 0
        self.pending: QuiesceSignal | None = None

    def check_in(self, store: SqlStore, tx: Tx) -> QuiesceSignal | None:
        """Fold in the events committed since the last check, inside `tx`; the pending request, if any."""
        return self.fold(store, tx.rows(*self._lookup(store, tx)))

    def lookup_later(self, store: SqlStore, tx: Tx) -> Callable[[], QuiesceSignal | None]:
        """`check_in` in two halves: the lookup is queued in `tx` now (on PostgreSQL it costs the seal no round
        trip of its own); the returned function folds its rows in, to be called once `tx` has committed."""
        rows = tx.rows_later(*self._lookup(store, tx))
        return lambda: self.fold(store, rows())

    def _lookup(self, store: SqlStore, tx: Tx) -> tuple[str, tuple[object, ...]]:
        return (store.with_packed(tx, _WATCH_SQL),
                (self.run_id, self.run_id, self.mark, *(t.value for t in _WATCHED_TYPES)))

    def fold(self, store: SqlStore, rows: Sequence[Row]) -> QuiesceSignal | None:
        """Fold in the rows of one lookup (events after the mark, and the run's highest seq); the pending request."""
        high = self.mark
        for top, seq, *row in rows:
            if top is not None:
                high = max(high, int(top))
            if seq is None:
                continue
            event = event_of(store.dialect, *row)
            if event.event_type is EventType.HANDOFF_REQUESTED:
                self.pending = QuiesceSignal(run_id=self.run_id, request_seq=int(seq), reason=event.reason or "")
            elif self.pending is not None and event.detail.get("request_seq") == self.pending.request_seq:
                self.pending = None
        self.mark = high
        return self.pending

    def check(self, store: SqlStore) -> QuiesceSignal | None:
        """As `check_in`, in a read transaction of its own."""
        with store.read_tx() as tx:
            return self.check_in(store, tx)


def acknowledge_quiesce(
    store: SqlStore, signal: QuiesceSignal, *, checkpoint_id: str | None, epoch: int, placement: str, note: str = ""
) -> int:
    """Record that the source stopped at a boundary (and which checkpoint it sealed there)."""
    return store.append_event(
        Event(
            event_type=EventType.SOURCE_QUIESCED,
            run_id=signal.run_id,
            at=store.db_now(),
            checkpoint_id=checkpoint_id,
            source_placement=placement,
            source_epoch=epoch,
            reason=signal.reason,
            detail={"request_seq": signal.request_seq, "note": note},
        )
    )


def wait_for_quiesce(store: SqlStore, run_id: str, request_seq: int, *, timeout_s: float, poll_s: float = 0.02) -> Event | None:
    """The SOURCE_QUIESCED answer to `request_seq`, or None if none came within `timeout_s`."""
    deadline = clock.monotonic() + timeout_s
    while True:
        for _, event in store.list_events(run_id=run_id, after_seq=request_seq, event_types=[EventType.SOURCE_QUIESCED]):
            if event.detail.get("request_seq") == request_seq:
                return event
        if clock.monotonic() >= deadline:
            return None
        clock.sleep(poll_s)


def wait_for_handoff_result(
    store: SqlStore, run_id: str, request_seq: int, *, timeout_s: float, poll_s: float = 0.02
) -> EventType | None:
    """For a quiesced source: OWNERSHIP_TRANSFERRED or HANDOFF_ABORTED once decided, None on timeout."""
    deadline = clock.monotonic() + timeout_s
    wanted = [EventType.OWNERSHIP_TRANSFERRED, EventType.HANDOFF_ABORTED]
    while True:
        for _, event in store.list_events(run_id=run_id, after_seq=request_seq, event_types=wanted):
            if event.detail.get("request_seq") == request_seq:
                return event.event_type
        if clock.monotonic() >= deadline:
            return None
        clock.sleep(poll_s)
