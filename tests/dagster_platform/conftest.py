"""Fixtures for the platform tests: a Baton home with its SQLite store and blobs, and the same on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.factory import open_store


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Baton home; BATON_HOME points at it (the Dagster resources read it)."""
    root = tmp_path / "baton-home"
    root.mkdir()
    monkeypatch.setenv("BATON_HOME", str(root))
    monkeypatch.delenv("BATON_DATABASE_URL", raising=False)
    monkeypatch.delenv("BATON_BLOBS", raising=False)
    return root


@pytest.fixture
def store(home: Path) -> Iterator[SqlStore]:
    opened = open_store(None, home)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def blobs(home: Path) -> BlobStore:
    return BlobStore(home / "blobs")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_store(request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlStore]:
    """The store on each backend; for PostgreSQL, BATON_DATABASE_URL names it."""
    if request.param == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
        monkeypatch.setenv("BATON_DATABASE_URL", url)
        opened = open_store(url)
    else:
        opened = open_store(None, home)
    try:
        yield opened
    finally:
        opened.close()
