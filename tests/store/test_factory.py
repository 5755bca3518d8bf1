"""open_store / baton_home / open_blobs choose the backend from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.errors import StoreError
from baton.store.blobs import BlobStore
from baton.store.factory import baton_home, open_blobs, open_store
from baton.store.postgres import PostgresStore
from baton.store.sqlite import SqliteStore


def test_baton_home_defaults_to_dot_baton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATON_HOME", raising=False)
    assert baton_home() == Path(".baton")
    monkeypatch.setenv("BATON_HOME", "/srv/baton")
    assert baton_home() == Path("/srv/baton")


def test_embedded_sqlite_under_baton_home(baton_home: Path) -> None:
    with open_store() as store:
        assert isinstance(store, SqliteStore)
        assert store.backend == "sqlite"
        assert store.path == baton_home / "baton.db"
    assert (baton_home / "baton.db").exists()


def test_explicit_home_and_sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATON_DATABASE_URL", raising=False)
    with open_store(None, tmp_path / "home") as store:
        assert isinstance(store, SqliteStore) and store.path == tmp_path / "home" / "baton.db"
    with open_store("sqlite:///" + str(tmp_path / "other.db")) as store:
        assert isinstance(store, SqliteStore) and store.path == tmp_path / "other.db"


def test_unsupported_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="mysql"):
        open_store("mysql://db/baton", tmp_path)


def test_sqlite_file_is_in_wal_mode(tmp_path: Path) -> None:
    with open_store(None, tmp_path) as store:
        assert store.execute_raw("PRAGMA journal_mode") == [("wal",)]
        assert store.execute_raw("PRAGMA synchronous") == [(2,)]  # FULL
        assert store.execute_raw("PRAGMA foreign_keys") == [(1,)]


def test_database_url_from_environment_selects_postgres(
    postgres_url: str, baton_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    with open_store() as store:
        assert isinstance(store, PostgresStore)
        assert store.backend == "postgres"
        assert store.applied_migrations()
        assert "postgresql" not in repr(store)
    assert not (baton_home / "baton.db").exists()


def test_open_blobs_under_home(tmp_path: Path) -> None:
    blobs = open_blobs(tmp_path)
    assert isinstance(blobs, BlobStore) and blobs.root == tmp_path / "blobs"
    ref = blobs.put(b"hello")
    assert blobs.get(ref) == b"hello"


def test_open_blobs_default_is_hybrid_with_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from baton.store.hybrid_blobs import DEFAULT_LARGE_BYTES, HybridBlobStore
    from baton.store.sql_blobs import SqlBlobStore

    monkeypatch.delenv("BATON_BLOBS", raising=False)
    monkeypatch.delenv("BATON_BLOBS_LARGE_BYTES", raising=False)
    with open_store(None, tmp_path) as store:
        blobs = open_blobs(tmp_path, store)
        assert isinstance(blobs, HybridBlobStore) and blobs.large_bytes == DEFAULT_LARGE_BYTES
        assert blobs.files.root == tmp_path / "blobs"
        monkeypatch.setenv("BATON_BLOBS_LARGE_BYTES", "2048")
        assert open_blobs(tmp_path, store).large_bytes == 2048  # type: ignore[attr-defined]
        monkeypatch.setenv("BATON_BLOBS", "files")
        assert isinstance(open_blobs(tmp_path, store), BlobStore)
        monkeypatch.setenv("BATON_BLOBS", "sql")
        assert type(open_blobs(tmp_path, store)) is SqlBlobStore


@pytest.mark.parametrize(("name", "value", "message"), [
    ("BATON_BLOBS", "pack", "BATON_BLOBS must be 'auto', 'sql' or 'files', not 'pack'"),
    ("BATON_BLOBS_LARGE_BYTES", "1MB", "whole number of bytes, not '1MB'"),
    ("BATON_BLOBS_LARGE_BYTES", "0", "must be positive, not 0"),
])
def test_open_blobs_refuses_bad_settings(
    name: str, value: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    with open_store(None, tmp_path) as store:
        with pytest.raises(StoreError, match=message.replace("(", r"\(")):
            open_blobs(tmp_path, store)
