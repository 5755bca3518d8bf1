"""The `backend` and `store` fixtures: one SQLite file, or one fresh PostgreSQL database, per test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from baton.store.base import SqlStore
from baton.store.factory import open_store

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass(frozen=True)
class Backend:
    """Where a test's database lives; `url` opens more stores on the same database."""

    name: str
    url: str

    def open(self) -> SqlStore:
        return open_store(self.url)


def sqlite_url(path: Path) -> str:
    return "sqlite:///" + str(path.resolve())


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", sqlite_url(tmp_path / "baton.db"))
    return Backend("postgres", request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(backend: Backend) -> Iterator[SqlStore]:
    opened = backend.open()
    try:
        yield opened
    finally:
        opened.close()
