"""The few places where SQLite and PostgreSQL SQL differ, behind one small interface.

Store SQL is written once with `?` placeholders and these macros:

* `{now}`      the database clock, as a timestamp value;
* `{now_plus}` the database clock plus a duration given as one parameter
               (the parameter comes from `Dialect.duration_param`);
* `{json}`     a placeholder for a JSON document (text in SQLite, jsonb in PostgreSQL);
* `{bytes}`    a placeholder for bytes or NULL, typed even where nothing else types it
               (a VALUES list selected from, in PostgreSQL);
* `{for_update_lease}` the same, limited to the table aliased `l` (for joins);
* `{for_update}` a row-lock clause (empty in SQLite, where `BEGIN IMMEDIATE`
               already serializes writers).

`Dialect.render` expands the macros and converts placeholders for the driver.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from abc import ABC, abstractmethod
from typing import Any

from baton.errors import StoreError

APPEND_ONLY_MARK = "append-only"
"""Every append-only trigger's error message starts with this."""


class Dialect(ABC):
    """SQL differences between the backends; stateless."""

    name: str
    now_sql: str
    now_plus_sql: str
    clock_sql: str
    json_param_sql: str
    bytes_param_sql: str = "?"
    for_update_sql: str
    text_type: str = "TEXT"
    int_type: str = "BIGINT"
    ts_type: str
    json_type: str
    serial_pk: str

    def __init__(self) -> None:
        self._cache: dict[str, str] = {}

    def render(self, sql: str) -> str:
        """Expand the macros of `sql` and convert its placeholders (cached)."""
        cached = self._cache.get(sql)
        if cached is None:
            expanded = (
                sql.replace("{now_plus}", self.now_plus_sql)
                .replace("{now}", self.now_sql)
                .replace("{json}", self.json_param_sql)
                .replace("{bytes}", self.bytes_param_sql)
                .replace("{for_update_lease}", f"{self.for_update_sql} OF l" if self.for_update_sql else "")
                .replace("{for_update}", self.for_update_sql)
            )
            cached = self._placeholders(expanded)
            self._cache[sql] = cached
        return cached

    def ddl(self, sql: str) -> str:
        """Expand the type macros of a DDL statement."""
        return (
            sql.replace("{text}", self.text_type)
            .replace("{int}", self.int_type)
            .replace("{ts}", self.ts_type)
            .replace("{jsondoc}", self.json_type)
            .replace("{serial_pk}", self.serial_pk)
        )

    def _placeholders(self, sql: str) -> str:
        return sql

    @abstractmethod
    def duration_param(self, seconds: float) -> object:
        """The parameter `{now_plus}` expects for a duration of `seconds`."""

    @abstractmethod
    def ts_in(self, value: dt.datetime) -> object:
        """An aware datetime as the driver should receive it."""

    @abstractmethod
    def ts_out(self, value: Any) -> dt.datetime:
        """A stored timestamp as an aware UTC datetime."""

    def json_out(self, value: Any) -> Any:
        """A stored JSON document as Python data."""
        if value is None:
            return None
        if isinstance(value, (bytes, str)):
            return json.loads(value)
        return value

    def append_only_setup_ddl(self) -> list[str]:
        """Statements run once before `append_only_ddl` (e.g. a trigger function)."""
        return []

    @abstractmethod
    def append_only_ddl(self, table: str) -> list[str]:
        """Statements that make `table` refuse UPDATE and DELETE inside the database."""

    migration_lock_sql: str | None = None
    """Run first in the migration transaction (PostgreSQL: an advisory lock)."""

    event_append_lock_sql: str | None = None
    """Run before inserting an event, so event seq order equals commit order."""

    def with_append_lock(self, select: str) -> str:
        """`select` (a SELECT of volatile functions only, no table) run once the event append lock is held.

        One statement instead of two where the lock is a statement of its own
        (PostgreSQL). Only for what is evaluated after the lock, such as the
        clock: a READ COMMITTED statement's snapshot is taken before it waits
        for the lock, so a read that must see the last holder's writes needs
        a statement of its own after the lock.
        """
        if not self.event_append_lock_sql:
            return select
        assert select.startswith("SELECT ")
        return f"{select} FROM ({self.event_append_lock_sql} OFFSET 0) AS append_lock"

    def insert_with_append_lock(self, table: str, columns: str, rows: str) -> str:
        """`INSERT INTO table (columns) VALUES rows` that takes the event append lock first, in one statement.

        The rows reach the table only through a join with the lock's row, so
        every row (and the value its identity column draws) comes after the
        lock is held. Without a lock statement in the dialect: the plain INSERT.
        """
        if not self.event_append_lock_sql:
            return f"INSERT INTO {table} ({columns}) VALUES {rows}"
        return (f"WITH append_lock AS MATERIALIZED ({self.event_append_lock_sql}) "
                f"INSERT INTO {table} ({columns}) SELECT new_rows.* FROM append_lock, (VALUES {rows}) AS new_rows")


def check_duration(seconds: float) -> float:
    """A duration must be finite and non-negative."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        raise StoreError(f"duration must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise StoreError(f"duration must be finite and >= 0 seconds, got {seconds!r}")
    return float(seconds)


def require_aware(value: dt.datetime, what: str) -> dt.datetime:
    """Refuse naive datetimes: every time in Baton carries a zone."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise StoreError(f"{what} is a naive datetime ({value!r}); give it a time zone")
    return value.astimezone(dt.timezone.utc)
