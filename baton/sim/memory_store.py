"""The SQL store in memory: the same SQLite store code over one shared in-memory database.

`MemoryStore(name)` opens (or joins) the in-memory database called `name` in
this process; several store objects with one name see the same data, as
several processes see one SQLite file. All of them share one connection and
take turns, one transaction at a time (SQLite serializes writers anyway).
The database clock is a `baton.clock.Clock` (the clock in force by default),
so under simulation leases expire in virtual time, while every query,
trigger and migration is the production SQL.

`hooks` lets the simulation see each transaction begin and end (its
scheduler interleaves actors there, and crashes a worker at a durable step).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Protocol

from baton import clock as clocks
from baton.errors import StoreError
from baton.store.core import Tx
from baton.store.sqlite import MIN_SQLITE, SqliteDialect, SqliteStore

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


class TxHooks(Protocol):
    """Called around every transaction of a memory store (outside the transaction)."""

    def before_tx(self, store: MemoryStore, write: bool, caller: str) -> None: ...

    def after_tx(self, store: MemoryStore, write: bool, caller: str) -> None: ...


class ClockedSqliteDialect(SqliteDialect):
    """SQLite SQL whose `now` is the function `baton_now()`, answered by a Python clock."""

    now_sql = "baton_now()"
    now_plus_sql = "baton_now_plus(?)"
    clock_sql = "baton_now()"

    def duration_param(self, seconds: float) -> object:
        return float(seconds)


@dataclass
class _Database:
    conn: sqlite3.Connection
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0


_DATABASES: dict[str, _Database] = {}
_REGISTRY_LOCK = threading.Lock()


def _db_time(source: clocks.Clock | None) -> dt.datetime:
    chosen = source if source is not None else clocks.current()
    shared = getattr(chosen, "db_now", None)  # a virtual clock's unskewed time, as a server would see it
    return shared() if callable(shared) else chosen.now()


class MemoryStore(SqliteStore):
    """An in-memory SQL store named `name`; see the module docstring."""

    backend = "sqlite"

    def __init__(self, name: str, *, clock: clocks.Clock | None = None, hooks: TxHooks | None = None,
                 migrate: bool = True) -> None:
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old; baton needs 3.35 or newer")
        if not name or "/" in name:
            raise StoreError(f"an in-memory store needs a plain name, not {name!r}")
        super(SqliteStore, self).__init__()  # StoreCore: no file to open
        self.name = name
        self.clock = clock
        self.hooks = hooks
        self.busy_timeout_s = 0.0
        self.dialect = ClockedSqliteDialect()
        with _REGISTRY_LOCK:
            database = _DATABASES.get(name)
            if database is None:
                database = _Database(self._open_connection())
                _DATABASES[name] = database
            database.users += 1
        self._db = database
        if migrate:
            self.migrate()

    def __repr__(self) -> str:
        return f"MemoryStore({self.name!r})"

    def _open_connection(self) -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.create_function("baton_now", 0, lambda: _db_time(self.clock).strftime(_FORMAT))
        conn.create_function(
            "baton_now_plus", 1,
            lambda seconds: (_db_time(self.clock) + dt.timedelta(seconds=float(seconds))).strftime(_FORMAT),
        )
        return conn

    # -- StoreCore hooks ---------------------------------------------------------------------------

    def _conn(self) -> Any:
        if self._closed:
            raise StoreError(f"the in-memory store {self.name!r} is closed")
        return self._db.conn

    def _connect(self) -> sqlite3.Connection:  # pragma: no cover - _conn never asks
        return self._db.conn

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[Tx]:
        if getattr(self._local, "atomic", None) is not None:  # joins this thread's open `atomic()` block:
            with super()._tx(write) as tx:  # one durable step, already counted and interleaved when it began
                yield tx
            return
        hooks = self.hooks
        caller = ""
        if hooks is not None:
            caller = self._public_caller(sys._getframe(2))  # frame 1 is contextmanager's __enter__
            hooks.before_tx(self, write, caller)
        with self._db.lock:
            with super()._tx(write) as tx:
                yield tx
        if hooks is not None:
            hooks.after_tx(self, write, caller)

    def _public_caller(self, frame: FrameType) -> str:
        """The public store method this transaction runs for: the nearest one on the stack.

        Hooks name writes by it (the simulation's write faults target `append_checkpoint`, say), so a private
        helper that opens the transaction for a public method (`_statement_tx`, a shared append routine) is
        passed over, and a refactor of the store's internals does not rename its writes.
        """
        walked: FrameType | None = frame
        while walked is not None:
            name = walked.f_code.co_name
            if not name.startswith("_") and walked.f_locals.get("self") is self:
                return name
            walked = walked.f_back
        return frame.f_code.co_name

    def close(self) -> None:
        """Detach; the database goes away when its last store closes."""
        if self._closed:
            return
        self._closed = True
        with _REGISTRY_LOCK:
            self._db.users -= 1
            if self._db.users <= 0 and _DATABASES.get(self.name) is self._db:
                del _DATABASES[self.name]
                self._db.conn.close()

    def raw(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Read rows with plain SQL, outside the hooks (the simulation's oracles read records this way)."""
        with self._db.lock:
            return [tuple(row) for row in self._db.conn.execute(sql, params).fetchall()]
