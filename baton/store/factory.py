"""Choose and open the stores from the environment.

`BATON_DATABASE_URL` = `postgresql://...` selects PostgreSQL; otherwise the
embedded SQLite file `<BATON_HOME>/baton.db` is used (`BATON_HOME` defaults
to `./.baton`). `sqlite:///<path>` names another SQLite file explicitly.
"""

from __future__ import annotations

import os
from pathlib import Path

from baton.errors import StoreError
from baton.store.base import SqlStore
from baton.store.blobs import Blobs, BlobStore
from baton.store.sql_blobs import SqlBlobStore

ENV_HOME = "BATON_HOME"
ENV_DATABASE_URL = "BATON_DATABASE_URL"
DEFAULT_HOME = ".baton"
SQLITE_FILENAME = "baton.db"
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SQLITE_SCHEME = "sqlite:///"


def baton_home() -> Path:
    """The directory of Baton's local state: $BATON_HOME, or ./.baton."""
    value = os.environ.get(ENV_HOME, "").strip()
    return Path(value) if value else Path(DEFAULT_HOME)


def database_url() -> str | None:
    """$BATON_DATABASE_URL, or None when unset or empty."""
    value = os.environ.get(ENV_DATABASE_URL, "").strip()
    return value or None


def open_store(url: str | None = None, home: Path | str | None = None, *, migrate: bool = True) -> SqlStore:
    """Open (and migrate) the SQL store named by `url`, else by the environment."""
    url = url if url is not None else database_url()
    if url and url.startswith(_POSTGRES_SCHEMES):
        from baton.store.postgres import PostgresStore

        return PostgresStore(url, migrate=migrate)
    from baton.store.sqlite import SqliteStore

    if url and url.startswith(_SQLITE_SCHEME):
        return SqliteStore(Path(url[len(_SQLITE_SCHEME):]), migrate=migrate)
    if url:
        raise StoreError(
            f"unsupported database URL scheme in {url.split(':', 1)[0]!r}: "
            "use postgresql://... or sqlite:///<path>, or unset BATON_DATABASE_URL for the embedded store"
        )
    root = Path(home) if home is not None else baton_home()
    return SqliteStore(root / SQLITE_FILENAME, migrate=migrate)


def open_blobs(home: Path | str | None = None, store: SqlStore | None = None) -> Blobs:
    """The content-addressed blob store.

    Files under `<home>/blobs` by default; with `BATON_BLOBS=sql` and a
    `store`, the store's own blob table, so new blobs commit in the same
    transaction as the checkpoint that introduced them.
    """
    choice = os.environ.get("BATON_BLOBS", "files")
    if choice == "sql":
        if store is None:
            raise StoreError("BATON_BLOBS=sql needs the SQL store to keep blobs in (pass store=...)")
        return SqlBlobStore(store)
    if choice != "files":
        raise StoreError(f"BATON_BLOBS must be 'files' or 'sql', not {choice!r}")
    root = Path(home) if home is not None else baton_home()
    return BlobStore(root / "blobs")
