"""The shared fixtures: a store per backend, a blob store, a signing key and an authority.

Registered for every suite by `tests/conftest.py`; a suite's own conftest
only adds what is particular to it. `baton` is imported inside the fixtures,
not at import time, like everything the root conftest loads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from baton.authority import AuthorityService
    from baton.store.base import SqlStore
    from baton.store.blobs import BlobStore

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def sqlite_url(path: Path) -> str:
    return "sqlite:///" + str(path.resolve())


@dataclass(frozen=True)
class Backend:
    """Where a test's database lives; `url` opens more stores on the same database."""

    name: str
    url: str

    def open(self) -> SqlStore:
        from baton.store.factory import open_store

        return open_store(self.url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A fresh SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return Backend("sqlite", sqlite_url(tmp_path / "baton.db"))
    return Backend("postgres", str(request.getfixturevalue("postgres_url")))


@pytest.fixture
def store_url(backend: Backend) -> str:
    return backend.url


@pytest.fixture
def store(backend: Backend) -> Iterator[SqlStore]:
    opened = backend.open()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    from baton.store.blobs import BlobStore

    return BlobStore(tmp_path / "blobs")


@pytest.fixture
def authority(tmp_path: Path) -> AuthorityService:
    """The test's own in-process authority, with a fresh key ring under tmp_path/authority."""
    from baton.authority import AuthorityService
    from baton.authority_keys import KeyRing

    return AuthorityService(KeyRing.load_or_create(tmp_path / "authority"))
