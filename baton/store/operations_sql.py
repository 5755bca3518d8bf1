"""Operation ledger, idempotency keys and budget charges of the SQL store."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from baton.ablation import Ablation, is_ablated
from baton.errors import RecordNotFoundError, StaleEpochError, StoreError
from baton.identity import canonical_json
from baton.models.budget import BudgetUsage
from baton.models.operation import OperationEntry, OperationState
from baton.store.core import Row, StoreCore, Tx, json_text
from baton.store.records import BeginOutcome, IdempotencyRecord, OperationTransition

_IDEM_COLUMNS = "run_id, idempotency_key, payload_ref, operation_id, state, outcome"
_PG_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE (not imported: the SQLite backend runs without psycopg)
_FINAL_STATES = "('COMMITTED', 'NOT_COMMITTED')"

ClaimKind = Literal["new", "replay", "in_flight", "payload_mismatch", "refused"]


@dataclass(frozen=True)
class Claim:
    """The answer to claim_operation, with what it read under the run's lease lock."""

    epoch: int  # the run's current epoch
    now: dt.datetime  # the database clock
    kind: ClaimKind  # "refused": wrong epoch, or the clock reached valid_until; nothing was written
    entry: OperationEntry  # the entry, as recorded when "new"
    record: IdempotencyRecord | None = None  # what the key holds ("replay", "in_flight", "payload_mismatch")


# PostgreSQL: claim_operation in one statement. `lease` locks the run's lease row and reads
# its epoch and the clock (re-read if the row changed while this statement waited for the
# lock); the operation row is inserted only if the epoch is the entry's, the clock is before
# valid_until and the key is new; the transition and the key row follow from it. The SELECT
# returns the epoch, the clock, whether the operation was inserted, and the key's row as it
# was before this statement (packed in one column: the driver's cost per call grows with
# the columns). This statement's snapshot may predate a claim of the same key that held the
# lock before it: the key row's primary key then refuses the insert (unique violation,
# nothing written) and the claim is retried once, with a fresh snapshot.
_PG_CLAIM = (
    "WITH lease AS (SELECT epoch, clock_timestamp() AS now FROM leases WHERE run_id = ? FOR UPDATE),"
    " ok AS (SELECT now FROM lease WHERE epoch = ?"
    " AND (CAST(? AS timestamptz) IS NULL OR now < CAST(? AS timestamptz))),"
    " op AS (INSERT INTO operations (operation_id, run_id, idempotency_key, epoch, kind, target, state, body,"
    " created_at, updated_at)"
    " SELECT ?, ?, ?, ?, ?, ?, 'PREPARED',"
    " jsonb_set(CAST(? AS jsonb), '{recorded_at}', to_jsonb(COALESCE(CAST(? AS timestamptz), ok.now))),"
    " {now}, {now} FROM ok"
    " WHERE NOT EXISTS (SELECT 1 FROM idempotency WHERE run_id = ? AND idempotency_key = ?)"
    " RETURNING operation_id, epoch),"
    " tr AS (INSERT INTO operation_transitions (operation_id, state, epoch, at, detail)"
    " SELECT operation_id, 'PREPARED', epoch, {now}, ? FROM op),"
    " idem AS (INSERT INTO idempotency (run_id, idempotency_key, payload_ref, operation_id, state, outcome,"
    " created_at, updated_at) SELECT ?, ?, ?, operation_id, 'PREPARED', NULL, {now}, {now} FROM op)"
    " SELECT lease.epoch, lease.now, (SELECT count(*) FROM op),"
    " CASE WHEN i.run_id IS NOT NULL THEN jsonb_build_array(i.payload_ref, i.operation_id, i.state, i.outcome) END"
    " FROM lease LEFT JOIN idempotency i ON i.run_id = ? AND i.idempotency_key = ?"
)
_PG_CLAIM_UNFENCED = _PG_CLAIM.replace("WHERE epoch = ?", "WHERE (epoch = ? OR TRUE)", 1)  # ablation store-claim-epoch
_UNIQUE_VIOLATION = "23505"

# The operation body with its new state and (when given) detail, computed by the database.
_BODY_UPDATE = {
    "postgres": "body || jsonb_build_object('state', CAST(? AS text), 'detail', "
    "COALESCE(NULLIF(CAST(? AS text), ''), body->>'detail', ''))",
    "sqlite": "json_set(body, '$.state', ?, '$.detail', COALESCE(NULLIF(?, ''), json_extract(body, '$.detail'), ''))",
}

# PostgreSQL: a non-final operation's outcome, its key and its transition, in one statement
# (the transition's epoch is the run's current epoch). No row: the operation is missing or final.
_PG_FINISH = (
    "WITH op AS ("
    " UPDATE operations SET state = ?, body = " + _BODY_UPDATE["postgres"] + ", outcome = {json}, updated_at = {now}"
    f" WHERE operation_id = ? AND state NOT IN {_FINAL_STATES}"
    " RETURNING operation_id, run_id, idempotency_key, epoch, state, outcome),"
    " idem AS (UPDATE idempotency SET state = op.state, outcome = op.outcome, updated_at = {now} FROM op"
    " WHERE idempotency.run_id = op.run_id AND idempotency.idempotency_key = op.idempotency_key"
    " AND idempotency.operation_id = op.operation_id)"
    " INSERT INTO operation_transitions (operation_id, state, epoch, at, detail)"
    " SELECT op.operation_id, ?, COALESCE((SELECT l.epoch FROM leases l WHERE l.run_id = op.run_id), op.epoch),"
    " {now}, ? FROM op RETURNING seq"
)


class OperationsSql(StoreCore):
    """Epoch-fenced operations with idempotency, their history, and budget charges."""

    @contextmanager
    def _statement_tx(self) -> Iterator[Tx]:
        """A transaction whose writes are one statement.

        On PostgreSQL it runs in autocommit mode: one statement is atomic on its
        own, and the server has committed it (durably: synchronous_commit) before
        it answers, so the separate BEGIN and COMMIT round trips psycopg would
        send are saved. Any further statement in the block must be a read that
        needs no snapshot shared with the write. Elsewhere, an ordinary transaction.
        """
        conn = self._conn() if self.dialect.name == "postgres" else None
        if conn is None or conn.info.transaction_status != _PG_IDLE:
            with self._tx() as tx:
                yield tx
            return
        conn.autocommit = True
        try:
            with self._tx() as tx:
                yield tx
        finally:
            try:
                conn.autocommit = False
            except Exception:  # noqa: BLE001 - a broken connection is replaced on next use
                pass

    def _idem(self, row: Row) -> IdempotencyRecord:
        return IdempotencyRecord(
            run_id=row[0],
            idempotency_key=row[1],
            payload_ref=row[2],
            operation_id=row[3],
            state=OperationState(row[4]),
            outcome=self.dialect.json_out(row[5]),
        )

    def _locked_epoch(self, tx: Tx, run_id: str) -> int:
        row = tx.one("SELECT epoch FROM leases WHERE run_id = ? {for_update}", (run_id,))
        if row is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")
        return int(row[0])

    @staticmethod
    def _check_epoch(entry: OperationEntry, current: int) -> None:
        if entry.epoch != current and not is_ablated(Ablation.STORE_CLAIM_EPOCH):
            raise StaleEpochError(
                f"run {entry.run_id!r}: operation {entry.operation_id!r} was requested at epoch {entry.epoch}, "
                f"but the run's current epoch is {current}; the request is fenced"
            )

    def _insert_operation(self, tx: Tx, entry: OperationEntry, detail: str) -> None:
        tx.rows(
            "INSERT INTO operations (operation_id, run_id, idempotency_key, epoch, kind, target, state, body, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, {json}, {now}, {now})",
            (
                entry.operation_id,
                entry.run_id,
                entry.idempotency_key,
                entry.epoch,
                entry.kind,
                entry.target,
                OperationState.PREPARED.value,
                entry.model_dump_json(),
            ),
        )
        self._add_transition(tx, entry.operation_id, OperationState.PREPARED, entry.epoch, detail)

    @staticmethod
    def _add_transition(tx: Tx, operation_id: str, state: OperationState, epoch: int, detail: str) -> None:
        tx.rows(
            "INSERT INTO operation_transitions (operation_id, state, epoch, at, detail) VALUES (?, ?, ?, {now}, ?)",
            (operation_id, state.value, epoch, detail),
        )

    @staticmethod
    def _require_prepared(entry: OperationEntry) -> None:
        if entry.state is not OperationState.PREPARED:
            raise StoreError(f"operation {entry.operation_id!r} must start PREPARED, not {entry.state.value}")

    def begin_operation(self, entry: OperationEntry) -> BeginOutcome:
        """Fence by epoch, then claim the idempotency key (or say why it is taken)."""
        claim = self.claim_operation(entry, stamp=False)
        if claim.kind == "refused":  # without valid_until, only the epoch refuses
            self._check_epoch(entry, claim.epoch)
            raise StoreError(f"claim of operation {entry.operation_id!r} refused at the current epoch")
        if claim.kind == "new":
            # Built from the entry just written (validated by whoever built it): no need to validate again.
            record = IdempotencyRecord.model_construct(
                run_id=entry.run_id, idempotency_key=entry.idempotency_key, payload_ref=entry.payload_ref,
                operation_id=entry.operation_id, state=OperationState.PREPARED, outcome=None,
            )
            return BeginOutcome.model_construct(kind="new", record=record)
        assert claim.record is not None
        return BeginOutcome(kind=claim.kind, record=claim.record)

    def claim_operation(
        self, entry: OperationEntry, *, valid_until: dt.datetime | None = None, stamp: bool = True
    ) -> Claim:
        """Fence by epoch and time, then claim the entry's idempotency key, atomically.

        Under the run's lease row lock, reads the run's epoch and the database
        clock; records the entry PREPARED (operation, transition and key rows) only
        if its epoch is the current one, the clock is before `valid_until` (when
        given) and the key is new. Otherwise nothing is written and the claim says
        why: "refused" (epoch or time), or what the key already holds. With
        `stamp`, the entry is recorded at the clock read under the lock (its
        `recorded_at` is replaced); else at its own `recorded_at`.
        """
        self._require_prepared(entry)
        if is_ablated(Ablation.STORE_CLAIM_EXPIRY):  # the claim stops judging the capability's expiry
            valid_until = None
        for attempt in (1, 2):
            try:
                if self.dialect.name == "postgres":
                    with self._statement_tx() as tx:
                        return self._claim_pg(tx, entry, valid_until, stamp)
                with self._tx() as tx:
                    return self._claim_steps(tx, entry, valid_until, stamp)
            except StoreError as exc:
                if attempt == 2 or getattr(exc.__cause__, "sqlstate", None) != _UNIQUE_VIOLATION:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _admitted(entry: OperationEntry, current: int, now: dt.datetime, valid_until: dt.datetime | None) -> bool:
        epoch_ok = entry.epoch == current or is_ablated(Ablation.STORE_CLAIM_EPOCH)
        return epoch_ok and (valid_until is None or now < valid_until)

    def _claim_pg(
        self, tx: Tx, entry: OperationEntry, valid_until: dt.datetime | None, stamp: bool
    ) -> Claim:
        run_id, key = entry.run_id, entry.idempotency_key
        row = tx.one(
            _PG_CLAIM_UNFENCED if is_ablated(Ablation.STORE_CLAIM_EPOCH) else _PG_CLAIM,
            (
                run_id,
                entry.epoch, valid_until, valid_until,
                entry.operation_id, run_id, key, entry.epoch, entry.kind, entry.target,
                entry.model_dump_json(), None if stamp else entry.recorded_at,
                run_id, key,
                entry.detail,
                run_id, key, entry.payload_ref,
                run_id, key,
            ),
        )
        if row is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")
        current, now, inserted = int(row[0]), self.dialect.ts_out(row[1]), int(row[2]) > 0
        admitted = self._admitted(entry, current, now, valid_until)
        if inserted and admitted:
            recorded = entry.model_copy(update={"recorded_at": now}) if stamp else entry
            return Claim(current, now, "new", recorded)
        if not admitted and not inserted:
            return Claim(current, now, "refused", entry)
        if admitted and row[3] is not None:
            return self._taken(current, now, entry, self._idem((run_id, key, *row[3])))
        raise StoreError(
            f"claim of key {key!r} of run {run_id!r} is inconsistent: epoch {current}, clock {now.isoformat()}, "
            f"inserted={inserted}, key row={'present' if row[3] is not None else 'absent'}"
        )

    def _claim_steps(
        self, tx: Tx, entry: OperationEntry, valid_until: dt.datetime | None, stamp: bool
    ) -> Claim:
        run_id, key = entry.run_id, entry.idempotency_key
        locked = tx.one(f"SELECT epoch, {self.dialect.clock_sql} FROM leases WHERE run_id = ? {{for_update}}", (run_id,))
        if locked is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")
        current, now = int(locked[0]), self.dialect.ts_out(locked[1])
        if not self._admitted(entry, current, now, valid_until):
            return Claim(current, now, "refused", entry)
        row = tx.one(f"SELECT {_IDEM_COLUMNS} FROM idempotency WHERE run_id = ? AND idempotency_key = ?", (run_id, key))
        if row is not None:
            return self._taken(current, now, entry, self._idem(row))
        recorded = entry.model_copy(update={"recorded_at": now}) if stamp else entry
        self._insert_operation(tx, recorded, recorded.detail)
        tx.rows(
            "INSERT INTO idempotency (run_id, idempotency_key, payload_ref, operation_id, state, outcome, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, NULL, {now}, {now})",
            (run_id, key, recorded.payload_ref, recorded.operation_id, "PREPARED"),
        )
        return Claim(current, now, "new", recorded)

    @staticmethod
    def _taken(current: int, now: dt.datetime, entry: OperationEntry, record: IdempotencyRecord) -> Claim:
        kind: ClaimKind
        if record.payload_ref != entry.payload_ref:
            kind = "payload_mismatch"
        elif record.state.is_final:
            kind = "replay"
        else:
            kind = "in_flight"
        return Claim(current, now, kind, entry, record)

    def rearm_operation(self, run_id: str, idempotency_key: str, new_entry: OperationEntry) -> IdempotencyRecord:
        """Replace a NOT_COMMITTED key with a new PREPARED operation (same payload, current epoch)."""
        self._require_prepared(new_entry)
        if (new_entry.run_id, new_entry.idempotency_key) != (run_id, idempotency_key):
            raise StoreError(
                f"rearm of ({run_id!r}, {idempotency_key!r}) got an operation for "
                f"({new_entry.run_id!r}, {new_entry.idempotency_key!r})"
            )
        with self._tx() as tx:
            self._check_epoch(new_entry, self._locked_epoch(tx, run_id))
            row = tx.one(
                f"SELECT {_IDEM_COLUMNS} FROM idempotency WHERE run_id = ? AND idempotency_key = ? {{for_update}}",
                (run_id, idempotency_key),
            )
            if row is None:
                raise RecordNotFoundError(f"run {run_id!r} has no idempotency key {idempotency_key!r} to re-arm")
            old = self._idem(row)
            if old.state is not OperationState.NOT_COMMITTED:
                raise StoreError(
                    f"key {idempotency_key!r} of run {run_id!r} is {old.state.value}; "
                    "only NOT_COMMITTED can be re-armed"
                )
            if old.payload_ref != new_entry.payload_ref:
                raise StoreError(
                    f"key {idempotency_key!r} of run {run_id!r} was for payload {old.payload_ref}, "
                    f"not {new_entry.payload_ref}; use a new idempotency key"
                )
            self._insert_operation(tx, new_entry, new_entry.detail or f"re-armed after {old.operation_id}")
            tx.rows(
                "UPDATE idempotency SET operation_id = ?, state = 'PREPARED', outcome = NULL, updated_at = {now} "
                "WHERE run_id = ? AND idempotency_key = ? AND state = 'NOT_COMMITTED'",
                (new_entry.operation_id, run_id, idempotency_key),
            )
        return old.model_copy(
            update={"operation_id": new_entry.operation_id, "state": OperationState.PREPARED, "outcome": None}
        )

    def finish_operation(
        self, operation_id: str, state: OperationState, outcome: dict[str, Any] | None, detail: str = ""
    ) -> None:
        """Record an operation's outcome (COMMITTED, NOT_COMMITTED or UNKNOWN) and its transition.

        Final states are final: repeating the same final state is a no-op,
        changing it is refused.
        """
        state = OperationState(state)
        if state is OperationState.PREPARED:
            raise StoreError(f"operation {operation_id!r}: cannot move back to PREPARED")
        outcome_json = None if outcome is None else json_text(outcome, f"outcome of {operation_id!r}")
        with self._statement_tx() as tx:
            if self.dialect.name == "postgres":
                finished = tx.one(
                    _PG_FINISH,
                    (state.value, state.value, detail, outcome_json, operation_id, state.value, detail),
                ) is not None
            else:
                finished = self._finish_steps(tx, operation_id, state, outcome_json, detail)
            if finished:
                return
            # Nothing changed: the operation is missing, or already final (and so stays as read).
            row = tx.one("SELECT state FROM operations WHERE operation_id = ?", (operation_id,))
            if row is None:
                raise RecordNotFoundError(f"operation {operation_id!r} is not in the store")
            current = OperationState(row[0])
            if current is state and self._same_outcome(tx, operation_id, outcome):
                return
            raise StoreError(
                f"operation {operation_id!r} is already {current.value}; refusing to record {state.value}"
            )

    def _finish_steps(
        self, tx: Tx, operation_id: str, state: OperationState, outcome_json: str | None, detail: str
    ) -> bool:
        """Record a non-final operation's outcome, its key's and its transition; False if it is missing or final."""
        row = tx.one(
            "UPDATE operations SET state = ?, body = " + _BODY_UPDATE[self.dialect.name] + ", outcome = {json}, "
            f"updated_at = {{now}} WHERE operation_id = ? AND state NOT IN {_FINAL_STATES} "
            "RETURNING run_id, idempotency_key, epoch",
            (state.value, state.value, detail, outcome_json, operation_id),
        )
        if row is None:
            return False
        run_id, idempotency_key, epoch = row
        tx.rows(
            "UPDATE idempotency SET state = ?, outcome = {json}, updated_at = {now} "
            "WHERE run_id = ? AND idempotency_key = ? AND operation_id = ?",
            (state.value, outcome_json, run_id, idempotency_key, operation_id),
        )
        tx.rows(
            "INSERT INTO operation_transitions (operation_id, state, epoch, at, detail) "
            "VALUES (?, ?, COALESCE((SELECT epoch FROM leases WHERE run_id = ?), ?), {now}, ?)",
            (operation_id, state.value, run_id, int(epoch), detail),
        )
        return True

    def _same_outcome(self, tx: Tx, operation_id: str, outcome: dict[str, Any] | None) -> bool:
        """True when `outcome` is absent or equals the outcome already recorded for the operation."""
        if outcome is None:
            return True
        row = tx.one("SELECT outcome FROM operations WHERE operation_id = ?", (operation_id,))
        stored = None if row is None else self.dialect.json_out(row[0])
        return stored is not None and canonical_json(stored) == canonical_json(outcome)

    def get_operation(self, operation_id: str) -> OperationEntry:
        """The operation with its latest state."""
        with self._tx(write=False) as tx:
            row = tx.one("SELECT body FROM operations WHERE operation_id = ?", (operation_id,))
        if row is None:
            raise RecordNotFoundError(f"operation {operation_id!r} is not in the store")
        return OperationEntry.model_validate(self.dialect.json_out(row[0]))

    def list_operations(
        self, run_id: str, states: Iterable[OperationState | str] | None = None
    ) -> list[OperationEntry]:
        """The run's operations in the order they were prepared, optionally by state."""
        sql = "SELECT o.body FROM operations o WHERE o.run_id = ?"
        params: list[Any] = [run_id]
        if states is not None:
            wanted = [OperationState(value).value for value in states]
            if not wanted:
                return []
            sql += " AND o.state IN (" + ", ".join("?" for _ in wanted) + ")"
            params.extend(wanted)
        sql += (
            " ORDER BY (SELECT MIN(t.seq) FROM operation_transitions t WHERE t.operation_id = o.operation_id),"
            " o.operation_id"
        )
        with self._tx(write=False) as tx:
            rows = tx.rows(sql, params)
        return [OperationEntry.model_validate(self.dialect.json_out(row[0])) for row in rows]

    def operation_history(self, operation_id: str) -> list[OperationTransition]:
        """Every recorded state of an operation, oldest first."""
        with self._tx(write=False) as tx:
            rows = tx.rows(
                "SELECT seq, operation_id, state, epoch, at, detail FROM operation_transitions "
                "WHERE operation_id = ? ORDER BY seq",
                (operation_id,),
            )
        return [
            OperationTransition(
                seq=int(seq), operation_id=op, state=OperationState(state), epoch=int(epoch),
                at=self.dialect.ts_out(at), detail=detail,
            )
            for seq, op, state, epoch, at, detail in rows
        ]

    def get_idempotency(self, run_id: str, idempotency_key: str) -> IdempotencyRecord | None:
        """What the store holds for this key, or None."""
        with self._tx(write=False) as tx:
            row = tx.one(
                f"SELECT {_IDEM_COLUMNS} FROM idempotency WHERE run_id = ? AND idempotency_key = ?",
                (run_id, idempotency_key),
            )
        return None if row is None else self._idem(row)

    # -- budget ----------------------------------------------------------------------------

    def append_budget_charge(self, run_id: str, epoch: int, charge: BudgetUsage, reason: str, *,
                             fenced: bool = False) -> None:
        """Record consumption charged to the run (append-only).

        `fenced`: a charge made before spending (a reservation), so it is the permission to spend
        too: StaleEpochError, and nothing recorded, unless `epoch` is the run's current epoch, read
        in the same transaction. Spend already incurred is recorded whatever the epoch."""
        with self._tx() as tx:
            self._require_run(tx, run_id)
            if fenced:
                current = self._locked_epoch(tx, run_id)
                if epoch != current and not is_ablated(Ablation.STORE_CLAIM_EPOCH):
                    raise StaleEpochError(f"run {run_id!r}: a charge reserved at epoch {epoch}, but the run's current "
                                          f"epoch is {current}; the reserving worker is fenced and may spend nothing")
            self.insert_budget_charges(tx, run_id, epoch, [(charge, reason)])

    @staticmethod
    def insert_budget_charges(tx: Tx, run_id: str, epoch: int, charges: Sequence[tuple[BudgetUsage, str]]) -> None:
        """Append charges inside a caller's transaction (one that already knows the run exists),
        e.g. a checkpoint's, so a boundary's spend commits with the seal.

        A charge is stored without its zero fields (every field of `BudgetUsage` defaults
        to zero, so `budget_used` reads the same charge back); a boundary's charge is
        usually one tool call, and the zeros were four fifths of its row."""
        for charge, reason in charges:
            tx.send(
                "INSERT INTO budget_charges (run_id, epoch, reason, charge, at) VALUES (?, ?, ?, {json}, {now})",
                (run_id, epoch, reason, charge.model_dump_json(exclude_defaults=True)),
            )

    def budget_used(self, run_id: str) -> BudgetUsage:
        """The sum of every charge recorded for the run."""
        with self._tx(write=False) as tx:
            rows = tx.rows("SELECT charge FROM budget_charges WHERE run_id = ? ORDER BY seq", (run_id,))
        total = BudgetUsage()
        for (charge,) in rows:
            total = total.plus(BudgetUsage.model_validate(self.dialect.json_out(charge)))
        return total
