"""Runs and the event log of the SQL store."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from baton.errors import IntegrityError, RecordNotFoundError, StoreError
from baton.models.checkpoint import RunKind
from baton.models.events import CATALOG_EVENT_RUN_ID, Event, EventType
from baton.store import row_codec
from baton.store.core import Row, StoreCore, Tx, json_text
from baton.store.dialect import require_aware
from baton.store.records import RUN_STATUSES, Lease, RunRecord

EVENTS_PER_INSERT = 100
"""Events written by one multi-row INSERT (400 parameters: far under either backend's limit)."""
_EVENT_COLUMNS = "run_id, event_type, at, body, packed"
_RUN_COLUMNS = "run_id, kind, release_id, placement, status, created_at, updated_at, detail"


_EVENT_ROW_FIELDS = frozenset({"event_type", "run_id", "at"})
"""Event fields kept in columns of their own, so not repeated in the row's JSON body."""
EVENT_SELECT = "seq, event_type, run_id, at, body, {packed}"
"""The columns `event_of` needs, in its order after `seq` (`{packed}`: see `StoreCore.with_packed`)."""
PACKED_BODY = "{}"
"""`events.body` of a row whose JSON is kept in `packed` instead (migration 8): an empty object."""


def _event_body(event: Event) -> str:
    """An event's JSON as stored: the fields that are not None, less those in columns of their own.

    Every optional field of `Event` defaults to None, and `event_of` puts the column
    values back, so a row reads back as the event written (a null cost ~20 bytes a key,
    and the three columns ~100 bytes an event).
    """
    return event.model_dump_json(exclude_none=True, exclude=set(_EVENT_ROW_FIELDS))


def _stored_body(event: Event, packed: bool) -> tuple[str, bytes | None]:
    """(`body`, `packed`) column values of an event row: the JSON as it is, or packed (`row_codec`)."""
    text = _event_body(event)
    if not packed:
        return text, None
    return PACKED_BODY, row_codec.pack_text(text)


def event_of(dialect: Any, event_type: Any, run_id: Any, at: Any, body: Any, packed: Any = None) -> Event:
    """The event of an `events` row (selected as EVENT_SELECT). Rows written before the body left
    out its column fields still carry them, and keep their own values. A packed body that does not
    unpack raises IntegrityError; one that unpacks fails as the same text in `body` would."""
    if packed is not None:
        try:
            text = row_codec.unpack_text(bytes(packed))
        except ValueError as exc:
            raise IntegrityError(f"event of run {run_id!r}: its packed body is corrupt ({exc})") from None
        doc = dict(json.loads(text))
    else:
        doc = dict(dialect.json_out(body))
    doc.setdefault("event_type", str(event_type))
    doc.setdefault("run_id", str(run_id))
    doc.setdefault("at", dialect.ts_out(at))
    return Event.model_validate(doc)


def _status(status: str) -> str:
    if status not in RUN_STATUSES:
        raise StoreError(f"unknown run status {status!r}; expected one of {sorted(RUN_STATUSES)}")
    return status


class RunsSql(StoreCore):
    """Runs (one lease row each, created with the run) and append-only events."""

    def _run(self, row: Row) -> RunRecord:
        ts = self.dialect.ts_out
        return RunRecord(
            run_id=row[0],
            kind=RunKind(row[1]),
            release_id=row[2],
            placement=row[3],
            status=row[4],
            created_at=ts(row[5]),
            updated_at=ts(row[6]),
            detail=self.dialect.json_out(row[7]) or {},
        )

    def _run_row(self, tx: Tx, run_id: str, lock: bool = False) -> Row:
        row = tx.one(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?" + (" {for_update}" if lock else ""),
            (run_id,),
        )
        if row is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")
        return row

    def create_run(
        self,
        run_id: str,
        kind: RunKind | str,
        release_id: str,
        placement: str | None,
        detail: dict[str, Any] | None = None,
    ) -> RunRecord:
        """Record a new active run and its lease row (epoch 0, no owner)."""
        if not run_id:
            raise StoreError("run_id must not be empty")
        if run_id == CATALOG_EVENT_RUN_ID:
            raise StoreError(f"run id {run_id!r} is reserved for catalog events")
        run_kind = RunKind(kind)
        detail_json = json_text(detail or {}, f"detail of run {run_id!r}")
        with self._tx() as tx:
            if tx.one("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)) is not None:
                raise StoreError(f"run {run_id!r} already exists")
            tx.rows(
                "INSERT INTO runs (run_id, kind, release_id, placement, status, created_at, updated_at, detail) "
                "VALUES (?, ?, ?, ?, 'active', {now}, {now}, {json})",
                (run_id, run_kind.value, release_id, placement, detail_json),
            )
            tx.rows(
                "INSERT INTO leases (run_id, owner, epoch, expires_at, updated_at) VALUES (?, NULL, 0, NULL, {now})",
                (run_id,),
            )
            row = self._run_row(tx, run_id)
        return self._run(row)

    def get_run(self, run_id: str) -> RunRecord:
        """The run `run_id`; RecordNotFoundError (a StoreError) if unknown."""
        with self._tx(write=False) as tx:
            row = self._run_row(tx, run_id)
        return self._run(row)

    def get_run_and_lease(self, run_id: str) -> tuple[RunRecord, Lease]:
        """The run and its lease row, as `get_run` and `get_lease` return them, read by one statement."""
        with self._tx(write=False) as tx:
            row = tx.one(
                f"SELECT {', '.join('r.' + c for c in _RUN_COLUMNS.split(', '))}, l.owner, l.epoch, l.expires_at "
                "FROM runs r JOIN leases l ON l.run_id = r.run_id WHERE r.run_id = ?",
                (run_id,),
            )
        if row is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")
        owner, epoch, expires_at = row[8:]
        lease = Lease(run_id=row[0], owner=owner, epoch=int(epoch),
                      expires_at=None if expires_at is None else self.dialect.ts_out(expires_at))
        return self._run(row[:8]), lease

    def list_runs(self, status: str | None = None) -> list[RunRecord]:
        """Runs in creation order, optionally only those with `status`."""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs"
        params: tuple[Any, ...] = ()
        if status is not None:
            sql += " WHERE status = ?"
            params = (_status(status),)
        with self._tx(write=False) as tx:
            rows = tx.rows(sql + " ORDER BY created_at, run_id", params)
        return [self._run(row) for row in rows]

    def set_run_status(self, run_id: str, status: str, detail: dict[str, Any] | None = None) -> RunRecord:
        """Set a run's status; `detail`, when given, is merged into the run's detail."""
        _status(status)
        with self._tx() as tx:
            current = self._run(self._run_row(tx, run_id, lock=True))
            merged = {**current.detail, **(detail or {})}
            tx.rows(
                "UPDATE runs SET status = ?, detail = {json}, updated_at = {now} WHERE run_id = ?",
                (status, json_text(merged, f"detail of run {run_id!r}"), run_id),
            )
            row = self._run_row(tx, run_id)
        return self._run(row)

    def set_run_placement(
        self, run_id: str, placement: str | None, *, events: Sequence[Event] = (), stamp: bool = False
    ) -> RunRecord:
        """Record where the run now executes.

        `events`, if any, are appended in the same transaction (all or nothing,
        as `append_events` does, `stamp` included), so the move and its record
        commit together.
        """
        prepared = self._event_rows(events)
        with self._tx() as tx:
            row = tx.one(
                f"UPDATE runs SET placement = ?, updated_at = {{now}} WHERE run_id = ? RETURNING {_RUN_COLUMNS}",
                (placement, run_id),
            )
            if row is None:
                raise RecordNotFoundError(f"run {run_id!r} is not in the store")
            # The run's row lock comes first and the event lock last, held only until the commit.
            self._insert_events(tx, prepared, stamp=stamp)
        return self._run(row)

    # -- events ------------------------------------------------------------------------

    def append_event(self, event: Event) -> int:
        """Append an event; return its seq (seq order is commit order)."""
        return self.append_events([event])[0]

    def append_events(self, events: Sequence[Event], *, stamp: bool = False) -> list[int]:
        """Append `events` in one transaction, in the order given; return their seqs.

        All or none commit. Seq order is commit order, as for `append_event`:
        the batch's seqs increase in list order and no other writer's event
        falls between them or commits before them with a higher seq. With
        `stamp`, each event's `at` is replaced by the database clock, read in
        this transaction once the append lock is held (so times follow seq
        order too); otherwise `at` is kept as given.
        """
        prepared = self._event_rows(events)
        if not prepared:
            return []
        with self._tx() as tx:
            return self._insert_events(tx, prepared, stamp=stamp)

    def _event_rows(self, events: Sequence[Event]) -> list[tuple[Event, object]]:
        """Each event with its time as the driver takes it (checked before any transaction starts)."""
        return [(event, self.dialect.ts_in(require_aware(event.at, "event time"))) for event in events]

    def _insert_events(
        self, tx: Tx, prepared: Sequence[tuple[Event, object]], *, stamp: bool, seqs_wanted: bool = True
    ) -> list[int]:
        """Insert `prepared` under the append lock; their seqs in list order (none unless `seqs_wanted`).

        Without `seqs_wanted` the INSERT is sent without waiting for an answer (see
        `Tx.send`): in a pipelined transaction it rides with the commit.
        """
        if not prepared:
            return []
        # The append lock serializes appends (seq order = commit order). Where it is a statement of its own
        # (PostgreSQL), it rides in the first statement that needs it: the clock read, or else the INSERT.
        if stamp:
            clock_sql = "SELECT " + self.dialect.clock_sql
            clock = tx.one(clock_sql if tx.append_locked else self.dialect.with_append_lock(clock_sql))
            tx.append_locked = True
            assert clock is not None
            now = self.dialect.ts_out(clock[0])
            at_in = self.dialect.ts_in(now)
            prepared = [(event.model_copy(update={"at": now}), at_in) for event, _ in prepared]
        seqs: list[int] = []
        for start in range(0, len(prepared), EVENTS_PER_INSERT):  # one round trip per chunk, not per event
            chunk = prepared[start:start + EVENTS_PER_INSERT]
            pack = self.compress_blobs  # type: ignore[attr-defined]  # BlobsSql's flag: rows at rest are packed
            params = [value for event, at in chunk
                      for value in (event.run_id, event.event_type.value, at, *_stored_body(event, pack))]
            values = ", ".join(["(?, ?, ?, {json}, {bytes})"] * len(chunk))
            if tx.append_locked:
                insert = f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES {values}"
            else:
                insert = self.dialect.insert_with_append_lock("events", _EVENT_COLUMNS, values)
            if not seqs_wanted:
                tx.send(insert, params)
                tx.append_locked = True
                continue
            rows = tx.rows(insert + " RETURNING seq", params)
            tx.append_locked = True
            assert len(rows) == len(chunk)
            # Rows of one VALUES list take their seqs in list order (the append lock keeps other writers out);
            # neither backend promises RETURNING's row order, so the seqs are put back in that order.
            seqs.extend(sorted(int(row[0]) for row in rows))
        return seqs

    def list_events(
        self,
        run_id: str | None = None,
        after_seq: int = 0,
        event_types: Iterable[EventType | str] | None = None,
        limit: int | None = None,
    ) -> list[tuple[int, Event]]:
        """Events with seq > after_seq, in seq order, optionally filtered."""
        sql = f"SELECT {EVENT_SELECT} FROM events WHERE seq > ?"
        params: list[Any] = [after_seq]
        if run_id is not None:
            sql += " AND run_id = ?"
            params.append(run_id)
        if event_types is not None:
            types = [EventType(value).value for value in event_types]
            if not types:
                return []
            sql += " AND event_type IN (" + ", ".join("?" for _ in types) + ")"
            params.extend(types)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(0, int(limit)))
        with self._tx(write=False) as tx:
            rows = tx.rows(self.with_packed(tx, sql), params)
        return [(int(row[0]), event_of(self.dialect, *row[1:])) for row in rows]
