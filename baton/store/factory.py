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
from baton.store.hybrid_blobs import DEFAULT_LARGE_BYTES, HybridBlobStore
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

    `BATON_BLOBS` picks the backend:
    - `auto` (the default): with a `store`, small blobs in the store's own blob
      table (committed in the transaction of the checkpoint that introduced
      them) and blobs of `BATON_BLOBS_LARGE_BYTES` (default 1 MiB) or more as
      files under `<home>/blobs`; reads look in both, so a store written with
      file blobs reads unchanged. Without a `store`, files only.
    - `sql`: every blob in the store's table.
    - `files`: every blob a file under `<home>/blobs` (the layout before `auto`).
    """
    choice = os.environ.get("BATON_BLOBS", "").strip() or "auto"
    if choice not in ("auto", "sql", "files"):
        raise StoreError(f"BATON_BLOBS must be 'auto', 'sql' or 'files', not {choice!r}")
    if choice == "sql":
        if store is None:
            raise StoreError("BATON_BLOBS=sql needs the SQL store to keep blobs in (pass store=...)")
        return SqlBlobStore(store)
    root = Path(home) if home is not None else baton_home()
    files = BlobStore(root / "blobs")
    if choice == "files" or store is None:
        return files
    return HybridBlobStore(store, files, large_bytes=_large_bytes())


def _large_bytes() -> int:
    raw = os.environ.get("BATON_BLOBS_LARGE_BYTES", "").strip()
    if not raw:
        return DEFAULT_LARGE_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise StoreError(f"BATON_BLOBS_LARGE_BYTES must be a whole number of bytes, not {raw!r}") from None
    if value < 1:
        raise StoreError(f"BATON_BLOBS_LARGE_BYTES must be positive, not {value}")
    return value
