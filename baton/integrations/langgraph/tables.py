"""The saver's two tables in Baton's SQL store, and every statement that touches them.

`lg_checkpoints` indexes LangGraph checkpoints (thread, namespace, id) onto
the Baton checkpoint that sealed each one and the run-state blob holding its
manifest; `lg_writes` holds pending writes by value ref, the ordinary writes
of one task call packed in one row (keyed by their first index) and each
special write (error, interrupt, ...) in a row of its own, so a step's writes
cost one row rather than one per channel. Values themselves
live in the store's content-addressed blob table. The adapter is an extension
of the store, so it uses the store's transactions and blob insert directly:
its rows commit in the same transaction as the seal (or the fence check)
they belong to.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import base64

import ormsgpack

from baton.errors import CheckpointIntegrityError, StaleEpochError
from baton.identity import REF_PREFIX, hex_of
from baton.integrations.langgraph.values import INLINE_PREFIX, inline_bytes
from baton.store.base import SqlStore
from baton.store.core import Tx


def _ddl(store: SqlStore) -> list[str]:
    postgres = store.dialect.name == "postgres"
    binary = "BYTEA" if postgres else "BLOB"
    # SQLite keeps a rowid table plus a copy of every key in its primary-key index; without a
    # rowid the rows live in the key's own tree, once.
    compact = "" if postgres else " WITHOUT ROWID"
    return [
        "CREATE TABLE IF NOT EXISTS lg_checkpoints ("
        " thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,"
        " parent_checkpoint_id TEXT, lg_run_id TEXT, baton_seq BIGINT NOT NULL,"
        f" state_digest {binary} NOT NULL, metadata {binary} NOT NULL,"
        f" PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)){compact}",
        "CREATE INDEX IF NOT EXISTS lg_checkpoints_by_run ON lg_checkpoints (lg_run_id)",
        "CREATE TABLE IF NOT EXISTS lg_writes ("
        " thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,"
        f" task_id TEXT NOT NULL, idx BIGINT NOT NULL, task_path TEXT NOT NULL, writes {binary} NOT NULL,"
        f" PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)){compact}",
    ]


def setup(store: SqlStore) -> None:
    """Create the tables if they are missing (under the store's migration lock where it has one)."""
    with store._tx() as tx:
        if store.dialect.migration_lock_sql:
            tx.rows(store.dialect.migration_lock_sql)
        for statement in _ddl(store):
            tx.ddl(statement)


@dataclass(frozen=True)
class CheckpointRow:
    """One row of `lg_checkpoints`."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    lg_run_id: str | None
    baton_seq: int  # seq of the Baton checkpoint (of the thread's run) that sealed this one
    state_ref: str
    metadata: bytes


@dataclass(frozen=True)
class WriteRow:
    """One row of `lg_writes`."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    idx: int
    channel: str
    task_path: str
    value_ref: str


_CKPT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, lg_run_id, baton_seq, state_digest, metadata"
)
_WRITE_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, writes"


def _ckpt(row: Sequence[Any]) -> CheckpointRow:
    return CheckpointRow(str(row[0]), str(row[1]), str(row[2]), None if row[3] is None else str(row[3]),
                         None if row[4] is None else str(row[4]), int(row[5]), REF_PREFIX + bytes(row[6]).hex(),
                         bytes(row[7]))


def _pack(rows: Sequence[WriteRow]) -> bytes:
    """[idx, channel, digest] per write, or [idx, channel, None, blob] for a value kept inline."""
    packed: list[list[Any]] = []
    for row in rows:
        inline = inline_bytes(row.value_ref)
        if inline is None:
            packed.append([row.idx, row.channel, bytes.fromhex(hex_of(row.value_ref))])
        else:
            packed.append([row.idx, row.channel, None, inline])
    return ormsgpack.packb(packed)


def _ref(entry: Sequence[Any]) -> str:
    if entry[2] is None:
        return INLINE_PREFIX + base64.b64encode(bytes(entry[3])).decode("ascii")
    return REF_PREFIX + bytes(entry[2]).hex()


def _unpack(row: Sequence[Any]) -> list[WriteRow]:
    try:
        packed = ormsgpack.unpackb(bytes(row[6]))
        return [WriteRow(str(row[0]), str(row[1]), str(row[2]), str(row[3]), int(entry[0]), str(entry[1]),
                         str(row[5]), _ref(entry))
                for entry in packed]
    except (ormsgpack.MsgpackDecodeError, TypeError, ValueError, IndexError) as exc:
        raise CheckpointIntegrityError(f"pending writes of task {row[3]!r} are malformed: {exc}") from None


def _batches(rows: Sequence[WriteRow]) -> list[list[WriteRow]]:
    """Ordinary writes of one task in one batch; each special (negative index) write alone."""
    batches: dict[tuple[str, str, str, str, str], list[WriteRow]] = {}
    single: list[list[WriteRow]] = []
    for row in rows:
        if row.idx < 0:
            single.append([row])
        else:
            batches.setdefault((row.thread_id, row.checkpoint_ns, row.checkpoint_id, row.task_id, row.task_path),
                               []).append(row)
    return [*batches.values(), *single]


@contextmanager
def reading(store: SqlStore) -> Iterator[Tx]:
    """A read transaction of the store."""
    with store._tx(write=False) as tx:
        yield tx


@contextmanager
def writing(store: SqlStore) -> Iterator[Tx]:
    """A write transaction of the store."""
    with store._tx() as tx:
        yield tx


def insert_blobs(store: SqlStore, tx: Tx, blobs: Mapping[str, bytes]) -> None:
    """Store content-addressed blobs in `tx` (duplicates are ignored)."""
    if blobs:
        store._insert_blobs(tx, blobs)


def check_epoch(tx: Tx, run_id: str, epoch: int) -> None:
    """Lock the run's lease row and refuse a writer whose epoch is below the run's current one."""
    row = tx.one("SELECT epoch FROM leases WHERE run_id = ? {for_update}", (run_id,))
    if row is not None and epoch < int(row[0]):
        raise StaleEpochError(
            f"run {run_id!r}: a write at epoch {epoch} is refused, the run is at epoch {int(row[0])}: "
            "this worker has been fenced"
        )


def insert_checkpoint(tx: Tx, row: CheckpointRow) -> None:
    tx.rows(
        f"INSERT INTO lg_checkpoints ({_CKPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
        "parent_checkpoint_id = excluded.parent_checkpoint_id, lg_run_id = excluded.lg_run_id, "
        "baton_seq = excluded.baton_seq, state_digest = excluded.state_digest, "
        "metadata = excluded.metadata",
        (row.thread_id, row.checkpoint_ns, row.checkpoint_id, row.parent_checkpoint_id, row.lg_run_id,
         row.baton_seq, bytes.fromhex(hex_of(row.state_ref)), row.metadata),
    )


def insert_writes(tx: Tx, rows: Sequence[WriteRow], *, replace: bool) -> None:
    """Insert writes; an existing (task, idx) is kept, or replaced when `replace` (special channels)."""
    conflict = "DO UPDATE SET task_path = excluded.task_path, writes = excluded.writes" if replace else "DO NOTHING"
    for batch in _batches(rows):
        first = min(batch, key=lambda row: row.idx)
        tx.rows(
            f"INSERT INTO lg_writes ({_WRITE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            f"ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict}",
            (first.thread_id, first.checkpoint_ns, first.checkpoint_id, first.task_id, first.idx, first.task_path,
             _pack(sorted(batch, key=lambda row: row.idx))),
        )


def select_checkpoints(
    tx: Tx,
    *,
    thread_id: str | None,
    checkpoint_ns: str | None,
    checkpoint_id: str | None = None,
    before_id: str | None = None,
    limit: int | None = None,
) -> list[CheckpointRow]:
    """Matching rows, newest checkpoint id first."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("thread_id", thread_id), ("checkpoint_ns", checkpoint_ns), ("checkpoint_id", checkpoint_id)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if before_id is not None:
        clauses.append("checkpoint_id < ?")
        params.append(before_id)
    sql = f"SELECT {_CKPT_COLUMNS} FROM lg_checkpoints"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY checkpoint_id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return [_ckpt(row) for row in tx.rows(sql, params)]


def select_writes(tx: Tx, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> list[WriteRow]:
    """The pending writes of one checkpoint, by task then index."""
    rows = tx.rows(
        f"SELECT {_WRITE_COLUMNS} FROM lg_writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? "
        "ORDER BY task_id, idx",
        (thread_id, checkpoint_ns, checkpoint_id),
    )
    return [write for row in rows for write in _unpack(row)]


def select_thread_writes(tx: Tx, thread_id: str) -> list[WriteRow]:
    rows = tx.rows(f"SELECT {_WRITE_COLUMNS} FROM lg_writes WHERE thread_id = ?", (thread_id,))
    return [write for row in rows for write in _unpack(row)]


def delete_thread(tx: Tx, thread_id: str) -> None:
    tx.rows("DELETE FROM lg_writes WHERE thread_id = ?", (thread_id,))
    tx.rows("DELETE FROM lg_checkpoints WHERE thread_id = ?", (thread_id,))


def delete_checkpoints(tx: Tx, keys: Sequence[tuple[str, str, str]]) -> None:
    """Delete these (thread, namespace, id) checkpoints and their writes."""
    for thread_id, checkpoint_ns, checkpoint_id in keys:
        params = (thread_id, checkpoint_ns, checkpoint_id)
        tx.rows("DELETE FROM lg_writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", params)
        tx.rows("DELETE FROM lg_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", params)


def keys_for_runs(tx: Tx, run_ids: Sequence[str]) -> list[tuple[str, str, str]]:
    """(thread, namespace, id) of the checkpoints LangGraph recorded for these run ids."""
    if not run_ids:
        return []
    marks = ", ".join("?" for _ in run_ids)
    rows = tx.rows(
        f"SELECT thread_id, checkpoint_ns, checkpoint_id FROM lg_checkpoints WHERE lg_run_id IN ({marks})",
        tuple(run_ids),
    )
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]
