"""Fencing tokens, and the target-side guard that honours them.

A fencing token is the pair (run id, epoch) that the mutation gateway hands to
a target with every consequential request. A target remembers, per run, the
highest epoch it has been shown and refuses anything lower. That check lives
at the target, so a worker that was paused, lost its lease and then woke up
cannot change anything there even if it skips the gateway altogether.

`FenceGuard` keeps those high-water marks in a SQLite table
(`baton_fence(run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)`) inside a
database file the target owns, so the guard survives a target restart and can
join the target's own transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from baton.ablation import Ablation, is_ablated
from baton.errors import FencedTokenError

_SCHEMA = "CREATE TABLE IF NOT EXISTS baton_fence (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)"


@dataclass(frozen=True, slots=True)
class FencingToken:
    """Proof of which epoch of which run a request speaks for, and the capability it carries (if any).

    The capability travels beside the token so a target can check it itself;
    it is not part of the fencing wire form (`as_dict`).
    """

    run_id: str
    epoch: int
    capability: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.run_id:
            raise ValueError("a fencing token needs a run id")
        if isinstance(self.epoch, bool) or not isinstance(self.epoch, int) or self.epoch < 0:
            raise ValueError(f"a fencing token epoch is a non-negative integer, not {self.epoch!r}")

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON form, as sent on the wire."""
        return {"run_id": self.run_id, "epoch": self.epoch}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FencingToken:
        """Parse the wire form; raises ValueError on anything malformed."""
        if not isinstance(data, dict) or set(data) != {"run_id", "epoch"}:
            raise ValueError(f"malformed fencing token: {data!r}")
        return cls(run_id=data["run_id"], epoch=data["epoch"])


@runtime_checkable
class FenceAware(Protocol):
    """A target that can be told, ahead of any request, that an epoch now rules a run."""

    def advance_fence(self, token: FencingToken) -> int:
        """Raise the target's high-water mark for the run to at least `token.epoch`; return the mark."""
        ...


class FenceGuard:
    """Per-run highest-seen epoch, persisted in the target's SQLite file.

    `admit` is the whole rule: a token below the mark is refused with
    `FencedTokenError`; an equal token passes; a higher one raises the mark.
    Pass the target's open connection to run the check inside the same
    transaction as the side effect it guards.
    """

    def __init__(self, path: Path | str) -> None:
        self._path = str(path)
        with self._connect() as conn:
            self.install(conn)

    @staticmethod
    def install(conn: sqlite3.Connection) -> None:
        """Create the guard's table in `conn` if needed."""
        conn.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    @contextmanager
    def _own_transaction(self, conn: sqlite3.Connection | None) -> Iterator[sqlite3.Connection]:
        if conn is not None:
            yield conn
            return
        own = self._connect()
        try:
            own.execute("BEGIN IMMEDIATE")
            try:
                yield own
            except BaseException:
                own.execute("ROLLBACK")
                raise
            own.execute("COMMIT")
        finally:
            own.close()

    def admit(self, token: FencingToken, conn: sqlite3.Connection | None = None) -> int:
        """Accept `token` or raise `FencedTokenError`; return the run's mark afterwards."""
        with self._own_transaction(conn) as db:
            row = db.execute("SELECT epoch FROM baton_fence WHERE run_id = ?", (token.run_id,)).fetchone()
            if row is not None and token.epoch < int(row[0]) and not is_ablated(Ablation.TARGET_FENCE):
                raise FencedTokenError(
                    f"fencing token for run {token.run_id!r} carries epoch {token.epoch}, "
                    f"but this target has already seen epoch {int(row[0])}: the sender was fenced off",
                    run_id=token.run_id,
                    epoch=token.epoch,
                    highest_seen=int(row[0]),
                )
            if row is None:
                db.execute("INSERT INTO baton_fence (run_id, epoch) VALUES (?, ?)", (token.run_id, token.epoch))
            elif token.epoch > int(row[0]):
                db.execute("UPDATE baton_fence SET epoch = ? WHERE run_id = ?", (token.epoch, token.run_id))
            return max(token.epoch, int(row[0]) if row is not None else token.epoch)

    def advance(self, token: FencingToken, conn: sqlite3.Connection | None = None) -> int:
        """Raise the mark to `token.epoch` without refusing a lower token; return the mark."""
        with self._own_transaction(conn) as db:
            db.execute(
                "INSERT INTO baton_fence (run_id, epoch) VALUES (?, ?) "
                "ON CONFLICT(run_id) DO UPDATE SET epoch = MAX(epoch, excluded.epoch)",
                (token.run_id, token.epoch),
            )
            row = db.execute("SELECT epoch FROM baton_fence WHERE run_id = ?", (token.run_id,)).fetchone()
            return int(row[0])

    def highest(self, run_id: str, conn: sqlite3.Connection | None = None) -> int | None:
        """The highest epoch seen for `run_id`, or None if none yet."""
        if conn is not None:
            row = conn.execute("SELECT epoch FROM baton_fence WHERE run_id = ?", (run_id,)).fetchone()
        else:
            db = self._connect()
            try:
                row = db.execute("SELECT epoch FROM baton_fence WHERE run_id = ?", (run_id,)).fetchone()
            finally:
                db.close()
        return None if row is None else int(row[0])
