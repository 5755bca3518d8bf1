"""The store's plumbing: per-thread connections, one transaction per call, migrations, clock.

Backends supply connections, transaction start and error translation; the
record methods (runs, checkpoints, events, leases, operations, budget) are
mixins over `StoreCore`, combined into `SqlStore` in `base`.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Self

from baton.errors import AppendOnlyViolation, BatonError, RecordNotFoundError, StoreError
from baton.identity import canonical_json
from baton.store.dialect import APPEND_ONLY_MARK, Dialect
from baton.store.migrations import PACKED_ROWS, SCHEMA_MIGRATIONS_DDL, pending

Row = tuple[Any, ...]


def json_text(value: Any, what: str) -> str:
    """Canonical JSON text of `value` for a JSON column; StoreError if it cannot be encoded."""
    try:
        return canonical_json(value).decode("utf-8")
    except BatonError as exc:
        raise StoreError(f"{what} is not JSON-encodable: {exc}") from exc


class Tx:
    """One open transaction: run rendered SQL and fetch rows."""

    def __init__(self, conn: Any, dialect: Dialect, after_execute: Callable[[], None] | None = None) -> None:
        self._conn = conn
        self._cursor = conn.cursor()
        self._dialect = dialect
        self._after_execute = after_execute  # e.g. collect a pipelined statement's result before reading it
        self.append_locked = False
        """True once this transaction holds the event append lock (it is held until the transaction ends)."""

    def take_append_lock(self) -> None:
        """Take the event append lock (where the dialect has one) unless this transaction holds it already."""
        if self._dialect.event_append_lock_sql and not self.append_locked:
            self.send(self._dialect.event_append_lock_sql)
        self.append_locked = True

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Execute store SQL (macros and `?` placeholders) and return its rows, if any."""
        self._cursor.execute(self._dialect.render(sql), tuple(params))
        if self._after_execute is not None:
            self._after_execute()
        if self._cursor.description is None:
            return []
        return [tuple(row) for row in self._cursor.fetchall()]

    def send(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Execute store SQL whose result the caller does not read.

        In a pipelined transaction (PostgreSQL writes) the statement is queued
        and its outcome collected with the next statement's, in the same round
        trip; the server still runs the two one after the other, so the next
        one starts (and takes its snapshot) only once this one has finished.
        An error surfaces at the next statement or at the commit, and the
        transaction rolls back as for any failed statement. Elsewhere this is
        `rows` with the rows dropped.
        """
        self._cursor.execute(self._dialect.render(sql), tuple(params))

    def rows_later(self, sql: str, params: Sequence[Any] = ()) -> Callable[[], list[Row]]:
        """Execute a read whose rows the caller needs only after the transaction; return what gives them.

        In a pipelined transaction (PostgreSQL writes) the statement is queued
        like `send` and runs where it stands among the transaction's statements;
        its rows come back with the commit's round trip instead of one of their
        own. Call the returned function once the transaction has committed (it
        waits for the rows if called earlier). Elsewhere the rows are read now.
        """
        if self._after_execute is None:
            found = self.rows(sql, params)
            return lambda: found
        cursor = self._conn.cursor()
        cursor.execute(self._dialect.render(sql), tuple(params))

        def fetch() -> list[Row]:
            with cursor:
                return [] if cursor.description is None else [tuple(row) for row in cursor.fetchall()]

        return fetch

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def ddl(self, statement: str) -> None:
        """Execute a DDL statement verbatim, without parameters."""
        self._cursor.execute(statement)
        if self._after_execute is not None:
            self._after_execute()


class StoreCore(ABC):
    """Connections, transactions and schema; the store's record methods build on these."""

    backend: str
    dialect: Dialect

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[Any] = []
        self._closed = False
        self._pid = os.getpid()
        self._inherited: list[Any] = []

    # -- backend hooks -------------------------------------------------------------

    @abstractmethod
    def _connect(self) -> Any:
        """A new DB-API connection, configured, outside any transaction."""

    @abstractmethod
    def _is_usable(self, conn: Any) -> bool:
        """False when the connection is closed or broken and must be replaced."""

    @abstractmethod
    def _begin(self, conn: Any, write: bool) -> None:
        """Start a transaction (a write transaction takes the write lock where needed)."""

    @abstractmethod
    def _commit(self, conn: Any) -> None: ...

    @abstractmethod
    def _rollback(self, conn: Any) -> None: ...

    def _after_execute(self, conn: Any) -> Callable[[], None] | None:
        """What `Tx` calls after each statement of the transaction just begun (None: nothing)."""
        return None

    @abstractmethod
    def _is_db_error(self, exc: BaseException) -> bool:
        """True for errors raised by the driver or the database."""

    # -- connections and transactions ------------------------------------------------

    def _conn(self) -> Any:
        if self._closed:
            raise StoreError(f"the {self.backend} store is closed")
        if self._pid != os.getpid():
            # A forked child must not use or close the parent's connections; keep them
            # referenced so no finalizer ever runs on them (libpq would end the parent's session).
            with self._lock:
                self._inherited.extend(self._connections)
                self._local = threading.local()
                self._connections = []
                self._pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None or not self._is_usable(conn):
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _translate(self, exc: BaseException) -> BaseException | None:
        if isinstance(exc, BatonError) or not self._is_db_error(exc):
            return None
        message = str(exc).strip()
        if APPEND_ONLY_MARK in message:
            return AppendOnlyViolation(f"{self.backend}: {message}")
        return StoreError(f"{self.backend} refused the operation: {message}")

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[Tx]:
        """One transaction on this thread's connection; DB errors become StoreError.

        Inside `atomic()` on this thread, the call joins that transaction instead
        (it commits or rolls back with the whole block).
        """
        joined: Tx | None = getattr(self._local, "atomic", None)
        if joined is not None:
            try:
                yield joined
            except BaseException as exc:
                translated = self._translate(exc)
                if translated is not None:
                    raise translated from exc
                raise
            return
        if getattr(self._local, "in_tx", False):
            raise StoreError("nested store transactions are not supported")
        conn = self._conn()
        self._local.in_tx = True
        try:
            try:
                self._begin(conn, write)
                yield Tx(conn, self.dialect, self._after_execute(conn))
                self._commit(conn)
            except BaseException as exc:
                self._rollback_quietly(conn)
                translated = self._translate(exc)
                if translated is not None:
                    raise translated from exc
                raise
        finally:
            self._local.in_tx = False

    def read_tx(self) -> AbstractContextManager[Tx]:
        """A read transaction for several reads in a row (store calls on this thread must wait until it ends)."""
        return self._tx(write=False)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Run several store calls on this thread as ONE write transaction: all of them commit, or none.

        Every public method called inside the block joins it; an exception
        (or the process dying) rolls the whole block back. Not re-entrant.
        """
        if getattr(self._local, "in_tx", False):
            raise StoreError("atomic() cannot start inside another store transaction")
        try:
            with self._tx() as tx:
                self._local.atomic = tx
                try:
                    yield
                finally:
                    self._local.atomic = None
        except BaseException:
            self._after_rollback()
            raise

    def _after_rollback(self) -> None:
        """Forget what was cached from writes a rolled-back `atomic()` block made (hook for the mixins)."""
        bodies = getattr(self, "_bodies", None)
        if bodies is not None:
            bodies.clear()  # checkpoint bodies remembered by appends that never committed

    def _rollback_quietly(self, conn: Any) -> None:
        try:
            self._rollback(conn)
        except Exception:  # noqa: BLE001 - the original error matters more
            pass

    def close(self) -> None:
        """Close every connection this store opened (on any thread)."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def execute_raw(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement in its own write transaction (maintenance and tests only).

        `?` placeholders and the dialect macros work on both backends; database
        errors are translated (an append-only trigger -> AppendOnlyViolation).
        """
        with self._tx() as tx:
            return tx.rows(sql, params)

    # -- schema ------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply missing migrations under a lock; return the versions applied now."""
        with self._tx() as tx:
            if self.dialect.migration_lock_sql:
                tx.rows(self.dialect.migration_lock_sql)
            tx.ddl(self.dialect.ddl(SCHEMA_MIGRATIONS_DDL))
            recorded = tx.rows("SELECT version, name FROM schema_migrations")
            applied = {int(version): str(name) for version, name in recorded}
            todo = pending(applied)
            for migration in todo:
                for statement in migration.statements(self.dialect):
                    tx.ddl(statement)
                tx.rows(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, {now})",
                    (migration.version, migration.name),
                )
        self._packed_rows = True  # every migration is applied now, 8 included
        return [migration.version for migration in todo]

    _packed_rows: bool | None = None
    """Whether the schema has the `packed` columns of migration 8 (None: not known yet)."""

    def with_packed(self, tx: Tx, sql: str) -> str:
        """`sql` with `{packed}` as the `packed` column, or as `NULL AS packed` in a database opened without
        migrating that predates migration 8 (read as it is: every row of it is plain)."""
        if self._packed_rows is None:
            self._packed_rows = tx.one("SELECT 1 FROM schema_migrations WHERE version = ?", (PACKED_ROWS,)) is not None
        return sql.replace("{packed}", "packed" if self._packed_rows else "NULL AS packed")

    def applied_migrations(self) -> list[int]:
        """Versions recorded in schema_migrations, ascending."""
        with self._tx(write=False) as tx:
            return [int(row[0]) for row in tx.rows("SELECT version FROM schema_migrations ORDER BY version")]

    def db_now(self) -> dt.datetime:
        """The database clock, as an aware UTC datetime."""
        with self._tx(write=False) as tx:
            row = tx.one("SELECT " + self.dialect.clock_sql)
        assert row is not None
        return self.dialect.ts_out(row[0])

    def _require_run(self, tx: Tx, run_id: str) -> None:
        if tx.one("SELECT 1 FROM leases WHERE run_id = ?", (run_id,)) is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")

    def _lock_run(self, tx: Tx, run_id: str) -> None:
        """Lock the run's row until the transaction ends (serializes appends to its chain)."""
        if tx.one("SELECT 1 FROM runs WHERE run_id = ? {for_update}", (run_id,)) is None:
            raise RecordNotFoundError(f"run {run_id!r} is not in the store")
