"""Versioned schema migrations of the SQL store, shared by both backends.

Each migration is a version, a name and its statements for a dialect. Applied
versions are recorded in `schema_migrations`; `SqlStore.migrate` applies the
missing ones in one transaction under a lock, so concurrent openers agree.
Never edit a released migration: add a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from baton.errors import StoreError
from baton.store.dialect import Dialect

PACKED_ROWS = 8
"""The migration that adds the `packed` columns of `events` and `checkpoints`."""

APPEND_ONLY_TABLES: tuple[str, ...] = ("checkpoints", "events", "operation_transitions", "budget_charges")

SCHEMA_MIGRATIONS_DDL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version {int} PRIMARY KEY,
    name {text} NOT NULL,
    applied_at {ts} NOT NULL
)"""

_OPERATION_STATES = "('PREPARED', 'COMMITTED', 'NOT_COMMITTED', 'UNKNOWN')"

_CORE_TABLES: tuple[str, ...] = (
    """
    CREATE TABLE runs (
        run_id {text} PRIMARY KEY,
        kind {text} NOT NULL,
        release_id {text} NOT NULL,
        placement {text},
        status {text} NOT NULL CHECK (status IN ('active', 'verified', 'failed', 'escalated')),
        created_at {ts} NOT NULL,
        updated_at {ts} NOT NULL,
        detail {jsondoc} NOT NULL
    )""",
    """
    CREATE TABLE checkpoints (
        checkpoint_id {text} PRIMARY KEY,
        run_id {text} NOT NULL REFERENCES runs (run_id),
        seq {int} NOT NULL CHECK (seq >= 0),
        checkpoint_hash {text} NOT NULL UNIQUE,
        parent_checkpoint_id {text} REFERENCES checkpoints (checkpoint_id),
        schema_version {text} NOT NULL,
        boundary {text} NOT NULL,
        body {text} NOT NULL,
        sealed_at {ts} NOT NULL,
        UNIQUE (run_id, seq)
    )""",
    """
    CREATE TABLE events (
        seq {serial_pk},
        run_id {text} NOT NULL,
        event_type {text} NOT NULL,
        at {ts} NOT NULL,
        body {jsondoc} NOT NULL
    )""",
    """
    CREATE TABLE leases (
        run_id {text} PRIMARY KEY REFERENCES runs (run_id),
        owner {text},
        epoch {int} NOT NULL CHECK (epoch >= 0),
        expires_at {ts},
        updated_at {ts} NOT NULL
    )""",
    """
    CREATE TABLE operations (
        operation_id {text} PRIMARY KEY,
        run_id {text} NOT NULL REFERENCES runs (run_id),
        idempotency_key {text} NOT NULL,
        epoch {int} NOT NULL CHECK (epoch >= 0),
        kind {text} NOT NULL,
        target {text} NOT NULL,
        state {text} NOT NULL CHECK (state IN """ + _OPERATION_STATES + """),
        body {jsondoc} NOT NULL,
        outcome {jsondoc},
        created_at {ts} NOT NULL,
        updated_at {ts} NOT NULL
    )""",
    """
    CREATE TABLE operation_transitions (
        seq {serial_pk},
        operation_id {text} NOT NULL REFERENCES operations (operation_id),
        state {text} NOT NULL CHECK (state IN """ + _OPERATION_STATES + """),
        epoch {int} NOT NULL,
        at {ts} NOT NULL,
        detail {text} NOT NULL
    )""",
    """
    CREATE TABLE idempotency (
        run_id {text} NOT NULL REFERENCES runs (run_id),
        idempotency_key {text} NOT NULL,
        payload_ref {text} NOT NULL,
        operation_id {text} NOT NULL REFERENCES operations (operation_id),
        state {text} NOT NULL CHECK (state IN """ + _OPERATION_STATES + """),
        outcome {jsondoc},
        created_at {ts} NOT NULL,
        updated_at {ts} NOT NULL,
        PRIMARY KEY (run_id, idempotency_key)
    )""",
    """
    CREATE TABLE budget_charges (
        seq {serial_pk},
        run_id {text} NOT NULL REFERENCES runs (run_id),
        epoch {int} NOT NULL CHECK (epoch >= 0),
        reason {text} NOT NULL,
        charge {jsondoc} NOT NULL,
        at {ts} NOT NULL
    )""",
)

_INDEXES: tuple[str, ...] = (
    "CREATE INDEX runs_by_status ON runs (status, created_at)",
    "CREATE INDEX events_by_run ON events (run_id, seq)",
    "CREATE INDEX events_by_type ON events (event_type, seq)",
    "CREATE INDEX operations_by_run ON operations (run_id, state)",
    "CREATE INDEX transitions_by_operation ON operation_transitions (operation_id, seq)",
    "CREATE INDEX budget_charges_by_run ON budget_charges (run_id, seq)",
)


@dataclass(frozen=True)
class Migration:
    """One schema step: its statements depend on the dialect only through `build`."""

    version: int
    name: str
    build: Callable[[Dialect], Sequence[str]]

    def statements(self, dialect: Dialect) -> list[str]:
        return [dialect.ddl(statement) for statement in self.build(dialect)]


def _append_only(dialect: Dialect) -> list[str]:
    setup = dialect.append_only_setup_ddl()
    return setup + [statement for table in APPEND_ONLY_TABLES for statement in dialect.append_only_ddl(table)]


def _blobs(dialect: Dialect) -> list[str]:
    # Content-addressed and immutable: the key is the 32-byte digest, rows are never updated.
    if dialect.name == "sqlite":
        # A rowid table: WITHOUT ROWID leaves its pages half empty with rows of a few KiB.
        table = ["CREATE TABLE blobs (digest BLOB PRIMARY KEY, data BLOB NOT NULL)"]
    else:
        table = [
            "CREATE TABLE blobs (digest BYTEA PRIMARY KEY, data BYTEA NOT NULL)",
            # Keep blobs of a few KiB inline in the row instead of in TOAST chunks.
            "ALTER TABLE blobs ALTER COLUMN data SET STORAGE MAIN",
        ]
    return table + dialect.append_only_ddl("blobs")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core tables", lambda dialect: _CORE_TABLES),
    Migration(2, "append-only triggers", _append_only),
    Migration(3, "indexes", lambda dialect: _INDEXES),
    Migration(4, "content-addressed blobs", _blobs),
    Migration(5, "checkpoint rows stored as deltas", lambda dialect: [
        "ALTER TABLE checkpoints ADD COLUMN body_kind {text} NOT NULL DEFAULT 'full'",
    ]),
    Migration(6, "release and placement catalog", lambda dialect: _CATALOG),
    # Existing rows keep codec 0 (raw bytes); new rows may be compressed (baton.store.blobs_sql.encode_body).
    # Adding a column with a constant default rewrites no rows on either backend.
    Migration(7, "blob bodies compressed at rest", lambda dialect: [
        "ALTER TABLE blobs ADD COLUMN codec SMALLINT NOT NULL DEFAULT 0",
    ]),
    Migration(PACKED_ROWS, "small rows packed at rest", lambda dialect: _packed_rows(dialect)),
)


def _packed_rows(dialect: Dialect) -> list[str]:
    """Event and checkpoint bodies may be kept packed (`baton.store.row_codec`) in a new nullable column.

    Existing rows keep `packed` NULL and read as before; the new blob codec 2 needs no column, but a
    baton that does not know it must refuse the database, which this migration's number makes it do.
    No query selects events by type across runs (each filters by run first, through `events_by_run`),
    so `events_by_type` only cost bytes at every event and goes; `budget_charges_by_run` keys on the run alone.
    """
    blob = "BLOB" if dialect.name == "sqlite" else "BYTEA"
    statements = [
        f"ALTER TABLE events ADD COLUMN packed {blob}",
        f"ALTER TABLE checkpoints ADD COLUMN packed {blob}",
        "DROP INDEX events_by_type",
        # A run's charges are read all at once (`budget_used`); the rowid or a PostgreSQL posting list
        # keeps them in order under one key, so the key needs no seq.
        "DROP INDEX budget_charges_by_run",
        "CREATE INDEX budget_charges_by_run ON budget_charges (run_id)",
    ]
    if dialect.name == "postgres":
        statements += _hashed_keys()
    return statements


def _hashed_keys() -> list[str]:
    """PostgreSQL: content digests and checkpoint hashes stay unique through hash-index exclusion constraints.

    A digest is random, so a B-tree over it splits at random and sits about half full; a hash index holds
    a 4-byte hash code per row instead of the key. `INSERT ... ON CONFLICT DO NOTHING` (no conflict
    target) honours an exclusion constraint as it does a unique one, and every lookup is by equality.
    """
    return [
        "ALTER TABLE blobs ALTER COLUMN digest SET NOT NULL",
        "ALTER TABLE blobs DROP CONSTRAINT blobs_pkey",
        "ALTER TABLE blobs ADD CONSTRAINT blobs_digest_unique EXCLUDE USING hash (digest WITH =)",
        "ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_checkpoint_hash_key",
        "ALTER TABLE checkpoints ADD CONSTRAINT checkpoints_hash_unique EXCLUDE USING hash (checkpoint_hash WITH =)",
    ]


_CATALOG: tuple[str, ...] = (
    # The current catalog; its history is the catalog events in `events`. Each row names
    # the seq of the event that last changed it.
    """
    CREATE TABLE catalog_releases (
        release_id {text} PRIMARY KEY,
        name {text} NOT NULL UNIQUE,
        manifest {jsondoc} NOT NULL,
        state {text} NOT NULL CHECK (state IN ('published', 'withdrawn')),
        changed_seq {int} NOT NULL,
        updated_at {ts} NOT NULL
    )""",
    """
    CREATE TABLE catalog_placements (
        name {text} PRIMARY KEY,
        record {jsondoc} NOT NULL,
        environment_id {text} NOT NULL,
        changed_seq {int} NOT NULL,
        updated_at {ts} NOT NULL
    )""",
)


def pending(applied: dict[int, str]) -> list[Migration]:
    """Migrations not yet applied, in order; refuse a database this code does not know."""
    known = {migration.version: migration for migration in MIGRATIONS}
    unknown = sorted(set(applied) - set(known))
    if unknown:
        raise StoreError(
            f"database has schema migrations {unknown} that this version of baton does not know "
            f"(latest known: {max(known)}); upgrade baton before opening it"
        )
    for version, name in applied.items():
        if known[version].name != name:
            raise StoreError(
                f"schema migration {version} is recorded as {name!r} but this code calls it "
                f"{known[version].name!r}; the database was migrated by a different baton"
            )
    return [migration for migration in MIGRATIONS if migration.version not in applied]


def latest_version() -> int:
    return MIGRATIONS[-1].version
