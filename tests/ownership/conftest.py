"""Fixtures for the ownership tests: a store URL per backend, the authority, and one ledger service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.authority import AuthorityService
from baton.authority_keys import KeyRing
from baton.store.base import SqlStore
from baton.store.factory import open_store
from baton.targets.ledger_target import LedgerTargetProcess

from .worker_authority import WorkerAuthority

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
def authority(tmp_path: Path) -> AuthorityService:
    """The test's own (in-process) authority; its keys are the ones `worker_authority` serves."""
    return AuthorityService(KeyRing.load_or_create(tmp_path / "authority"))


@pytest.fixture
def worker_authority(
    authority: AuthorityService, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[WorkerAuthority]:
    """The authority as a process for worker processes, which can reach nothing else to get a capability."""
    with WorkerAuthority.start(tmp_path / "authority", store_url, monkeypatch) as served:
        yield served


@pytest.fixture(scope="session")
def ledger_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerTargetProcess]:
    """One real ledger service (subprocess) per test session; tests use their own run ids."""
    service = LedgerTargetProcess(tmp_path_factory.mktemp("ledger")).start()
    try:
        yield service
    finally:
        service.stop()
