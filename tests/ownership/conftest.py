"""Fixtures for the ownership tests: a store URL per backend, a signing key, and one ledger service."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.authority import AuthorityService
from baton.store.base import SqlStore
from baton.store.factory import open_store
from baton.targets.ledger_target import LedgerTargetProcess

from .support import KEY_ENV

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL: a fresh SQLite file, or a fresh PostgreSQL database."""
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
def signing_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A signing key in the environment (worker processes inherit it)."""
    key = secrets.token_hex(32)
    monkeypatch.setenv(KEY_ENV, key)
    return key


@pytest.fixture
def authority(signing_key: str) -> AuthorityService:
    return AuthorityService.from_config()


@pytest.fixture(scope="session")
def ledger_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerTargetProcess]:
    """One real ledger service (subprocess) per test session; tests use their own run ids."""
    service = LedgerTargetProcess(tmp_path_factory.mktemp("ledger")).start()
    try:
        yield service
    finally:
        service.stop()
