"""Operation ledger, idempotency keys and budget charges of the SQL store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from baton.errors import RecordNotFoundError, StaleEpochError, StoreError
from baton.identity import canonical_json
from baton.models.budget import BudgetUsage
from baton.models.operation import OperationEntry, OperationState
from baton.store.core import Row, StoreCore, Tx, json_text
from baton.store.records import BeginKind, BeginOutcome, IdempotencyRecord, OperationTransition

_IDEM_COLUMNS = "run_id, idempotency_key, payload_ref, operation_id, state, outcome"


class OperationsSql(StoreCore):
    """Epoch-fenced operations with idempotency, their history, and budget charges."""

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
        if entry.epoch != current:
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
        self._require_prepared(entry)
        with self._tx() as tx:
            self._check_epoch(entry, self._locked_epoch(tx, entry.run_id))
            row = tx.one(
                f"SELECT {_IDEM_COLUMNS} FROM idempotency WHERE run_id = ? AND idempotency_key = ?",
                (entry.run_id, entry.idempotency_key),
            )
            if row is None:
                self._insert_operation(tx, entry, entry.detail)
                tx.rows(
                    "INSERT INTO idempotency (run_id, idempotency_key, payload_ref, operation_id, state, outcome, "
                    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, NULL, {now}, {now})",
                    (entry.run_id, entry.idempotency_key, entry.payload_ref, entry.operation_id, "PREPARED"),
                )
                record = IdempotencyRecord(
                    run_id=entry.run_id,
                    idempotency_key=entry.idempotency_key,
                    payload_ref=entry.payload_ref,
                    operation_id=entry.operation_id,
                    state=OperationState.PREPARED,
                )
                return BeginOutcome(kind="new", record=record)
        record = self._idem(row)
        kind: BeginKind
        if record.payload_ref != entry.payload_ref:
            kind = "payload_mismatch"
        elif record.state.is_final:
            kind = "replay"
        else:
            kind = "in_flight"
        return BeginOutcome(kind=kind, record=record)

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
        with self._tx() as tx:
            row = tx.one(
                "SELECT state, run_id, body FROM operations WHERE operation_id = ? {for_update}", (operation_id,)
            )
            if row is None:
                raise RecordNotFoundError(f"operation {operation_id!r} is not in the store")
            current, run_id = OperationState(row[0]), row[1]
            if current.is_final:
                if current is state and self._same_outcome(tx, operation_id, outcome):
                    return
                raise StoreError(
                    f"operation {operation_id!r} is already {current.value}; refusing to record {state.value}"
                )
            entry = OperationEntry.model_validate(self.dialect.json_out(row[2]))
            updated = entry.model_copy(update={"state": state, "detail": detail or entry.detail})
            tx.rows(
                "UPDATE operations SET state = ?, body = {json}, outcome = {json}, updated_at = {now} "
                "WHERE operation_id = ?",
                (state.value, updated.model_dump_json(), outcome_json, operation_id),
            )
            tx.rows(
                "UPDATE idempotency SET state = ?, outcome = {json}, updated_at = {now} "
                "WHERE run_id = ? AND idempotency_key = ? AND operation_id = ?",
                (state.value, outcome_json, run_id, entry.idempotency_key, operation_id),
            )
            epoch_row = tx.one("SELECT epoch FROM leases WHERE run_id = ?", (run_id,))
            epoch = int(epoch_row[0]) if epoch_row is not None else entry.epoch
            self._add_transition(tx, operation_id, state, epoch, detail)

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

    def append_budget_charge(self, run_id: str, epoch: int, charge: BudgetUsage, reason: str) -> None:
        """Record consumption charged to the run (append-only)."""
        with self._tx() as tx:
            self._require_run(tx, run_id)
            tx.rows(
                "INSERT INTO budget_charges (run_id, epoch, reason, charge, at) VALUES (?, ?, ?, {json}, {now})",
                (run_id, epoch, reason, charge.model_dump_json()),
            )

    def budget_used(self, run_id: str) -> BudgetUsage:
        """The sum of every charge recorded for the run."""
        with self._tx(write=False) as tx:
            rows = tx.rows("SELECT charge FROM budget_charges WHERE run_id = ? ORDER BY seq", (run_id,))
        total = BudgetUsage()
        for (charge,) in rows:
            total = total.plus(BudgetUsage.model_validate(self.dialect.json_out(charge)))
        return total
