"""SQLite backend: one file in WAL mode, safe for several processes at once.

Each store object keeps one connection per thread. Writers start with
`BEGIN IMMEDIATE`, so the write lock is taken up front and waits (busy
timeout) instead of failing on upgrade; readers use deferred transactions and
never block writers under WAL. Timestamps are ISO-8601 UTC text, which
compares correctly as text; the database clock is SQLite's `'now'`, i.e. the
host clock shared by every process using the file.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from pathlib import Path
from typing import Any

from baton.errors import StoreError
from baton.store.base import SqlStore
from baton.store.dialect import APPEND_ONLY_MARK, Dialect

MIN_SQLITE = (3, 35, 0)  # RETURNING
PAGE_SIZE = 4096  # bytes; applies to a new database only
_ISO_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"


class SqliteDialect(Dialect):
    name = "sqlite"
    now_sql = _ISO_NOW
    now_plus_sql = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)"
    clock_sql = _ISO_NOW
    json_param_sql = "?"
    for_update_sql = ""
    ts_type = "TEXT"
    json_type = "TEXT"
    serial_pk = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def duration_param(self, seconds: float) -> object:
        return f"+{seconds:.6f} seconds"

    def ts_in(self, value: dt.datetime) -> object:
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def ts_out(self, value: Any) -> dt.datetime:
        parsed = dt.datetime.fromisoformat(str(value))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.timezone.utc)
        return parsed.astimezone(dt.timezone.utc)

    def append_only_ddl(self, table: str) -> list[str]:
        return [
            f"CREATE TRIGGER {table}_no_{op.lower()} BEFORE {op} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MARK}: {op} on {table} is refused'); END"
            for op in ("UPDATE", "DELETE")
        ]


class SqliteStore(SqlStore):
    """The embedded store: one SQLite file."""

    backend = "sqlite"

    def __init__(self, path: Path | str, *, busy_timeout_s: float = 30.0, migrate: bool = True) -> None:
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old; baton needs 3.35 or newer")
        if str(path) == ":memory:" or str(path).startswith("file:"):
            raise StoreError("the SQLite store needs a file path (each thread opens its own connection)")
        super().__init__()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout_s = busy_timeout_s
        self.dialect = SqliteDialect()
        self.compress_blobs = True  # a file at rest (the in-memory store of the simulation keeps rows raw)
        if migrate:
            self.migrate()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            str(self.path), timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            # Takes effect only on a new, empty database (before WAL). 4 KiB pages halve the bytes each
            # commit writes to the WAL (a boundary dirties about 14 pages) and the fixed cost of the
            # schema's one-page tables; 8 KiB pages pack the ~1.6 KB observation blobs tighter on long
            # runs (3% fewer bytes at 2,000 steps, 4% at 4,000). docs/benchmarks.md, stops 34 and 35.
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL; the switch needs a moment alone with the file, so retry while busy."""
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            try:
                (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
                break
            except sqlite3.OperationalError as exc:
                transient = "locked" in str(exc) or "busy" in str(exc)
                if not transient or time.monotonic() > deadline:
                    raise StoreError(f"cannot open {self.path} in WAL mode: {exc}") from exc
                time.sleep(0.01)
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path} refused WAL mode (journal mode is {mode!r})")

    def _is_usable(self, conn: Any) -> bool:
        try:
            conn.total_changes  # noqa: B018 - raises ProgrammingError once closed
        except sqlite3.ProgrammingError:
            return False
        return True

    def _begin(self, conn: Any, write: bool) -> None:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def _commit(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("COMMIT")

    def _rollback(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def _is_db_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)
