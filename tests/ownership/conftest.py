"""The ownership tests' own fixture: one ledger service (stores, signing key and authority are shared)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from baton.targets.ledger_target import LedgerTargetProcess


@pytest.fixture(scope="session")
def ledger_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerTargetProcess]:
    """One real ledger service (subprocess) per test session; tests use their own run ids."""
    service = LedgerTargetProcess(tmp_path_factory.mktemp("ledger")).start()
    try:
        yield service
    finally:
        service.stop()
