"""SIGSTOP a worker at a moment it holds no store transaction.

A case that freezes a worker models a stalled process holding a *capability*
(a GC pause, a stopped VM). The worker's heartbeat thread writes to the store
now and then; a SIGSTOP landing inside that write keeps the store's write lock
for as long as the process stays stopped, and every other process then fails
with "database is locked" after its busy timeout. That is a different fault
(the store made unavailable by a client) from the one the case is about, so
the freeze retries until the stopped process holds no transaction.
"""

from __future__ import annotations

import sqlite3
import time

from baton.faults.rig import RigError, sigcont, sigstop
from baton.store.base import SqlStore
from baton.store.sqlite import SqliteStore

PROBE_S = 1.0  # how long a probe waits for the write lock (other writers hold it for milliseconds)
ATTEMPTS = 20


def freeze_outside_transactions(pid: int, store: SqlStore) -> int:
    """SIGSTOP `pid`; retried (SIGCONT, a short pause, SIGSTOP) while the stopped process blocks the store."""
    for _ in range(ATTEMPTS):
        sigstop(pid)
        if store_unblocked(store):
            return pid
        sigcont(pid)
        time.sleep(0.05)
    raise RigError(f"worker {pid} was inside a store transaction at each of {ATTEMPTS} freezes")


def store_unblocked(store: SqlStore) -> bool:
    """True when no stopped client can be holding the store: a write transaction can start (SQLite),
    or no Baton session sits idle inside a transaction (PostgreSQL)."""
    if isinstance(store, SqliteStore):
        return _sqlite_write_lock_free(store)
    time.sleep(PROBE_S / 2)  # a live client's transaction ends well within this
    with store.read_tx() as tx:
        row = tx.one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'baton' "
            "AND state IN ('idle in transaction', 'idle in transaction (aborted)') "
            "AND state_change < now() - interval '0.4 seconds'"
        )
    return row is not None and int(row[0]) == 0


def _sqlite_write_lock_free(store: SqliteStore) -> bool:
    conn = sqlite3.connect(str(store.path), timeout=PROBE_S, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return False
        raise
    finally:
        conn.close()
