"""PostgreSQL backend (psycopg 3): autocommit off, one explicit transaction per store call.

Row locks (`SELECT ... FOR UPDATE`) and conditional UPDATEs give the
compare-and-set steps; under READ COMMITTED a blocked conditional UPDATE
re-checks its condition against the winner's row, so exactly one caller wins.
Sessions run in UTC; the database clock is the server's.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from baton.store.base import SqlStore
from baton.store.dialect import APPEND_ONLY_MARK, Dialect

# Arbitrary fixed keys for pg_advisory_xact_lock (64-bit signed).
MIGRATION_LOCK_KEY = 0x6261746F6E_01  # "baton" + 1
EVENT_APPEND_LOCK_KEY = 0x6261746F6E_02
APPEND_ONLY_SQLSTATE = "BA001"

_APPEND_ONLY_FUNCTION = (
    "CREATE OR REPLACE FUNCTION baton_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $body$\n"
    "BEGIN\n"
    f"    RAISE EXCEPTION '{APPEND_ONLY_MARK}: % on % is refused', TG_OP, TG_TABLE_NAME\n"
    f"        USING ERRCODE = '{APPEND_ONLY_SQLSTATE}';\n"
    "END\n"
    "$body$"
)


class StoreRollback(Exception):
    """Passed to a pipeline being left because its transaction rolls back (never raised)."""


class PostgresDialect(Dialect):
    name = "postgres"
    # statement_timestamp(): one value per statement, taken when the server receives it.
    now_sql = "statement_timestamp()"
    now_plus_sql = "(statement_timestamp() + make_interval(secs => ?))"
    clock_sql = "clock_timestamp()"
    json_param_sql = "CAST(? AS jsonb)"
    bytes_param_sql = "CAST(? AS bytea)"
    for_update_sql = "FOR UPDATE"
    ts_type = "TIMESTAMPTZ"
    json_type = "JSONB"
    serial_pk = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    migration_lock_sql = f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"
    event_append_lock_sql = f"SELECT pg_advisory_xact_lock({EVENT_APPEND_LOCK_KEY})"

    def _placeholders(self, sql: str) -> str:
        return sql.replace("%", "%%").replace("?", "%s")

    def duration_param(self, seconds: float) -> object:
        return float(seconds)

    def ts_in(self, value: dt.datetime) -> object:
        return value

    def ts_out(self, value: Any) -> dt.datetime:
        if not isinstance(value, dt.datetime):
            raise TypeError(f"expected a timestamptz, got {value!r}")
        return value.astimezone(dt.timezone.utc)

    def append_only_setup_ddl(self) -> list[str]:
        return [_APPEND_ONLY_FUNCTION]

    def append_only_ddl(self, table: str) -> list[str]:
        return [
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION baton_refuse_change()",
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION baton_refuse_change()",
        ]


class PostgresStore(SqlStore):
    """The shared store: a PostgreSQL database."""

    backend = "postgres"

    pipeline_writes = True
    """Write transactions in psycopg's pipeline mode (see `_begin`)."""

    def __init__(self, url: str, *, connect_timeout_s: int = 10, migrate: bool = True) -> None:
        super().__init__()
        self._pipelines: dict[int, tuple[Any, psycopg.Pipeline]] = {}  # connection id -> its write transaction's pipeline
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self.dialect = PostgresDialect()
        self.compress_blobs = True
        if migrate:
            self.migrate()

    def __repr__(self) -> str:
        return "PostgresStore(<url hidden>)"

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(
            self.url, autocommit=False, connect_timeout=self.connect_timeout_s, application_name="baton"
        )
        try:
            # No JIT: the store's statements are short lookups and writes. Before autovacuum has analyzed a new
            # store, the planner does not know a blob digest is unique (an exclusion constraint, not a unique
            # index), estimates millions of rows for a segment chain of tens and JIT-compiles the query:
            # about 130 ms a call for a query that runs in 0.3 ms (`baton bench handoff`, PostgreSQL, SQL blobs).
            conn.execute("SET TIME ZONE 'UTC'; SET jit = off")
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    def _is_usable(self, conn: Any) -> bool:
        return not conn.closed and not conn.broken

    def _begin(self, conn: Any, write: bool) -> None:
        # A read runs in autocommit: under READ COMMITTED every statement takes its own snapshot
        # inside a transaction too, so the reads see exactly what they would, without the BEGIN and
        # COMMIT round trips. A write transaction runs in pipeline mode: BEGIN goes out with the
        # first statement and COMMIT with the closing sync, not each in a round trip of its own.
        # Every statement is still synced (its result or error collected) before the next is sent,
        # so the transaction runs statement by statement exactly as without the pipeline.
        if not write:
            conn.autocommit = True
            return
        if conn.autocommit:
            return  # a one-statement write in autocommit mode: a pipeline would only add round trips
        if self.pipeline_writes:
            pipeline = conn.pipeline()
            self._pipelines[id(conn)] = (pipeline, pipeline.__enter__())  # no round trip: libpq only switches modes

    def _after_execute(self, conn: Any) -> Any:
        pipeline = self._pipelines.get(id(conn))
        return None if pipeline is None else pipeline[1].sync

    def _commit(self, conn: Any) -> None:
        if conn.autocommit:
            conn.autocommit = False
            return
        pipeline = self._pipelines.pop(id(conn), (None, None))[0]
        if pipeline is None:
            conn.commit()
            return
        try:
            with conn.cursor() as cursor:
                cursor.execute("COMMIT")  # queued; the pipeline's closing sync sends it and waits for its result
        except BaseException as exc:
            pipeline.__exit__(type(exc), exc, exc.__traceback__)
            raise
        pipeline.__exit__(None, None, None)  # raises if the COMMIT failed

    def _rollback(self, conn: Any) -> None:
        pipeline = self._pipelines.pop(id(conn), (None, None))[0]
        if conn.closed:
            return
        if pipeline is not None:
            # Leave pipeline mode, collecting whatever is still pending (errors only logged: the
            # transaction is being rolled back anyway).
            error = StoreRollback("rolling back")
            pipeline.__exit__(StoreRollback, error, None)
        if conn.autocommit:
            conn.autocommit = False
            return
        conn.rollback()

    def _is_db_error(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.Error)
