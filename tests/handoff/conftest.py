"""Fixtures for the handoff tests: a store per backend, a blob store, an authority and a fenced target."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.authority import AuthorityService
from baton.faults.target import LogTarget
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.factory import open_store

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return "sqlite:///" + str((tmp_path / "baton.db").resolve())
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


@pytest.fixture
def authority() -> AuthorityService:
    return AuthorityService(b"handoff-tests-signing-key-0123456789abcdef")


@pytest.fixture
def publisher(tmp_path: Path) -> Iterator[LogTarget]:
    target = LogTarget(tmp_path / "publisher", "publisher")
    try:
        yield target
    finally:
        target.close()
