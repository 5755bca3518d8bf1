"""The ownership tests' own fixtures: one ledger service, and the authority as a process for worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.authority import AuthorityService
from baton.targets.ledger_target import LedgerTargetProcess

from .worker_authority import WorkerAuthority


@pytest.fixture
def worker_authority(
    authority: AuthorityService, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[WorkerAuthority]:
    """The authority as a process for worker processes, which can reach nothing else to get a capability.

    It serves the key ring of the shared `authority` fixture (tmp_path/authority).
    """
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
