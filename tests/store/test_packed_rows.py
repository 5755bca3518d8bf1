"""Event and checkpoint bodies packed at rest (migration 8), on every SQL backend.

Stores at rest (the SQLite file, PostgreSQL) keep an event's JSON and a
checkpoint row's body text in the `packed` column, DEFLATE primed with
`row_codec.DICTIONARY_V1`; the simulation's in-memory store keeps them plain.
Both read back as written; damaged packed bytes raise the integrity error of
their kind; rows written before migration 8 still read; a database at
migration 7 migrates in place.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest

from baton.errors import CheckpointIntegrityError, IntegrityError
from baton.models import Event, EventType
from baton.store import row_codec
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.factory import open_store
from builders.checkpoints import seed_run
from builders.fixtures import Backend

AT = dt.datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=dt.timezone.utc)
DICTIONARY_V1_SHA256 = "7a6ae66214230cc08149f902444338ce1dce67a2c060168f916f6438de80fb2d"


def _event(run_id: str = "run-1") -> Event:
    return Event(event_type=EventType.CHECKPOINT_SEALED, run_id=run_id, at=AT, checkpoint_id=f"{run_id}/000001",
                 source_placement="eu-1", source_epoch=2, release_id="sha256:" + "a" * 64, state_schema="3",
                 resume_boundary="GENERATING", detail={"checkpoint_hash": "sha256:" + "b" * 64, "owner": "worker:w1"})


def _without_triggers(store: SqlStore, table: str, statement: str, params: tuple[object, ...]) -> None:
    """Change rows of an append-only table as a disk or operator error would: around its triggers."""
    if store.dialect.name == "sqlite":
        triggers = [(str(name), str(sql)) for name, sql in store.execute_raw(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,))]
        for name, _ in triggers:
            store.execute_raw(f'DROP TRIGGER "{name}"')
        try:
            store.execute_raw(statement, params)
        finally:
            for _, sql in triggers:
                store.execute_raw(sql)
    else:
        store.execute_raw(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        try:
            store.execute_raw(statement, params)
        finally:
            store.execute_raw(f"ALTER TABLE {table} ENABLE TRIGGER USER")


def test_the_dictionary_is_frozen() -> None:
    """DICTIONARY_V1 is part of the stored format: editing it would make every packed row unreadable."""
    assert hashlib.sha256(row_codec.DICTIONARY_V1).hexdigest() == DICTIONARY_V1_SHA256


def test_pack_round_trips_and_refuses_damage() -> None:
    text = _event().model_dump_json()
    packed = row_codec.pack_text(text)
    assert len(packed) < len(text) // 2 and row_codec.unpack_text(packed) == text
    for damaged in (packed[:-3], packed + b"\x00", b"\xff" * 8):
        with pytest.raises(ValueError):
            row_codec.unpack_text(damaged)
    for size in (4095, 4096, 4097, 40_000):  # either side of the small packer's limit, and far past its window
        data = (text.encode() * (size // len(text) + 1))[:size]
        assert row_codec.unpack(row_codec.pack(data)) == data


def test_events_are_packed_at_rest_and_read_back(store: SqlStore) -> None:
    event = _event()
    (seq,) = store.append_events([event])
    body, packed = store.execute_raw("SELECT body, packed FROM events WHERE seq = ?", (seq,))[0]
    if store.compress_blobs:  # the SQLite file and PostgreSQL
        assert packed is not None and len(bytes(packed)) < len(event.model_dump_json()) // 2
    else:  # the simulation's in-memory store keeps rows plain
        assert packed is None and "checkpoint_hash" in str(body)
    assert store.list_events(run_id="run-1") == [(seq, event)]
    assert store.list_events(event_types=[EventType.CHECKPOINT_SEALED]) == [(seq, event)]


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_packed_event_is_refused(store: SqlStore, damage: str) -> None:
    store.compress_blobs = True  # on every backend, the in-memory one included
    (seq,) = store.append_events([_event()])
    packed = bytes(store.execute_raw("SELECT packed FROM events WHERE seq = ?", (seq,))[0][0])
    changed = packed[: len(packed) // 2] if damage == "truncate" else packed[:-2] + bytes([packed[-2] ^ 0x40]) + packed[-1:]
    _without_triggers(store, "events", "UPDATE events SET packed = ? WHERE seq = ?", (changed, seq))
    with pytest.raises((IntegrityError, ValueError)):
        store.list_events(run_id="run-1")


def test_checkpoints_are_packed_at_rest_and_read_back(store: SqlStore, blobs: BlobStore) -> None:
    chain = seed_run(store, blobs, steps=4)
    rows = store.execute_raw("SELECT body, packed FROM checkpoints ORDER BY seq")
    if store.compress_blobs:
        assert all(body == "" and packed is not None for body, packed in rows)
    else:
        assert all(body != "" and packed is None for body, packed in rows)
    store._bodies = {}  # read from the rows, not from the cache of bodies just written
    assert store.list_checkpoints("run-1") == chain
    assert store.latest_checkpoint("run-1") == chain[-1]
    assert store.checkpoint_by_hash(chain[2].checkpoint_hash) == chain[2]


@pytest.mark.parametrize("which", [0, 2])
def test_a_damaged_packed_checkpoint_is_refused(store: SqlStore, blobs: BlobStore, which: int) -> None:
    store.compress_blobs = True
    chain = seed_run(store, blobs, steps=3)
    target = chain[which].checkpoint_id
    packed = bytes(store.execute_raw("SELECT packed FROM checkpoints WHERE checkpoint_id = ?", (target,))[0][0])
    _without_triggers(store, "checkpoints", "UPDATE checkpoints SET packed = ? WHERE checkpoint_id = ?",
                      (packed[: len(packed) // 2], target))
    store._bodies = {}
    with pytest.raises(CheckpointIntegrityError):
        store.get_checkpoint(chain[2].checkpoint_id)
    with pytest.raises(CheckpointIntegrityError):
        store.list_checkpoints("run-1")


def test_a_packed_checkpoint_of_other_content_fails_its_seal(store: SqlStore, blobs: BlobStore) -> None:
    store.compress_blobs = True
    chain = seed_run(store, blobs, steps=2)
    target = chain[1].checkpoint_id
    text = row_codec.unpack_text(bytes(store.execute_raw(
        "SELECT packed FROM checkpoints WHERE checkpoint_id = ?", (target,))[0][0]))
    at = text.index('"sha256:') + len('"sha256:')
    forged = text[:at] + ("1" if text[at] == "0" else "0") + text[at + 1:]  # another ref, well formed
    _without_triggers(store, "checkpoints", "UPDATE checkpoints SET packed = ? WHERE checkpoint_id = ?",
                      (row_codec.pack_text(forged), target))
    store._bodies = {}
    with pytest.raises(CheckpointIntegrityError):
        store.get_checkpoint(target)


def test_a_database_at_migration_7_migrates_and_reads(backend: Backend, tmp_path: Path) -> None:
    """Plain rows written before migration 8 read beside packed ones once the database migrates in place."""
    blobs = BlobStore(tmp_path / "blobs")
    with backend.open() as store:
        store.compress_blobs = False  # rows as a baton before migration 8 wrote them
        chain = seed_run(store, blobs, steps=3)
        (old_seq,) = store.append_events([_event()])
        _undo_migration_8(store)
    with _unmigrated(backend) as store:  # read as it is, without migrating (a legacy source)
        assert 8 not in store.applied_migrations()
        assert store.list_events(run_id="run-1") == [(old_seq, _event())]
        assert store.list_checkpoints("run-1") == chain and store.latest_checkpoint("run-1") == chain[-1]
    with backend.open() as store:
        assert 8 in store.applied_migrations()
        new = _event("run-2")
        (new_seq,) = store.append_events([new])
        assert store.list_events(run_id="run-1") == [(old_seq, _event())]
        assert store.list_events(run_id="run-2") == [(new_seq, new)]
        assert store.list_checkpoints("run-1") == chain
        assert store.checkpoint_by_hash(chain[1].checkpoint_hash) == chain[1]


def _unmigrated(backend: Backend) -> SqlStore:
    """A store on `backend`'s database opened without applying any migration."""
    if backend.url.startswith("memory:"):
        from baton.sim.memory_store import MemoryStore

        return MemoryStore(backend.url.removeprefix("memory:"), migrate=False)
    return open_store(backend.url, migrate=False)


def _undo_migration_8(store: SqlStore) -> None:
    """Put the schema back as migration 7 left it (plain rows only are in it)."""
    store.execute_raw("ALTER TABLE events DROP COLUMN packed")
    store.execute_raw("ALTER TABLE checkpoints DROP COLUMN packed")
    store.execute_raw("CREATE INDEX events_by_type ON events (event_type, seq)")
    store.execute_raw("DROP INDEX budget_charges_by_run")
    store.execute_raw("CREATE INDEX budget_charges_by_run ON budget_charges (run_id, seq)")
    if store.dialect.name == "postgres":
        store.execute_raw("ALTER TABLE blobs DROP CONSTRAINT blobs_digest_unique")
        store.execute_raw("ALTER TABLE blobs ADD PRIMARY KEY (digest)")
        store.execute_raw("ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_hash_unique")
        store.execute_raw("ALTER TABLE checkpoints ADD CONSTRAINT checkpoints_checkpoint_hash_key UNIQUE (checkpoint_hash)")
    store.execute_raw("DELETE FROM schema_migrations WHERE version = 8")


def test_digests_and_checkpoint_hashes_stay_unique(store: SqlStore) -> None:
    """The same blob stored twice is one row; a second row under a digest is refused by the database itself."""
    from baton.identity import sha256_ref
    from baton.store.blobs_sql import digest_of

    ref = sha256_ref(b"once")
    store.put_blobs({ref: b"once"})
    store.put_blobs({ref: b"once"})
    assert store.execute_raw("SELECT COUNT(*) FROM blobs WHERE digest = ?", (digest_of(ref),))[0][0] == 1
    with pytest.raises(Exception):
        store.execute_raw("INSERT INTO blobs (digest, data, codec) VALUES (?, ?, 0)", (digest_of(ref), b"twice"))
