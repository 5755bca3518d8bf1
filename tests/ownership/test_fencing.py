"""Fencing tokens and the target-side guard."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from baton.errors import FencedTokenError, StaleEpochError
from baton.fencing import FenceAware, FenceGuard, FencingToken
from baton.targets.ledger_target import LedgerTargetClient


def test_tokens_are_validated_and_round_trip() -> None:
    token = FencingToken("run-a", 4)
    assert FencingToken.from_dict(token.as_dict()) == token
    for bad in ({"run_id": "run-a"}, {"run_id": "run-a", "epoch": -1}, {"run_id": "", "epoch": 1},
                {"run_id": "r", "epoch": True}, {"run_id": "r", "epoch": 1, "extra": 0}):
        with pytest.raises(ValueError):
            FencingToken.from_dict(bad)


def test_the_guard_refuses_lower_epochs_per_run_and_remembers_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "target.db"
    guard = FenceGuard(path)
    assert guard.highest("run-a") is None
    assert guard.admit(FencingToken("run-a", 2)) == 2
    assert guard.admit(FencingToken("run-a", 2)) == 2  # the current epoch keeps working
    assert guard.admit(FencingToken("run-b", 1)) == 1  # runs are fenced independently
    with pytest.raises(FencedTokenError) as refused:
        guard.admit(FencingToken("run-a", 1))
    assert isinstance(refused.value, StaleEpochError)
    assert refused.value.highest_seen == 2 and "already seen epoch 2" in str(refused.value)
    assert guard.advance(FencingToken("run-a", 5)) == 5
    assert guard.advance(FencingToken("run-a", 3)) == 5  # never lowered
    restarted = FenceGuard(path)
    assert restarted.highest("run-a") == 5
    with pytest.raises(FencedTokenError):
        restarted.admit(FencingToken("run-a", 4))


def test_the_guard_is_atomic_under_concurrent_admissions(tmp_path: Path) -> None:
    guard = FenceGuard(tmp_path / "target.db")
    errors: list[BaseException] = []

    def admit(epoch: int) -> None:
        try:
            FenceGuard(tmp_path / "target.db").admit(FencingToken("run", epoch))
        except FencedTokenError:
            pass
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=admit, args=(epoch,)) for epoch in range(1, 21)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and guard.highest("run") == 20


def test_the_http_client_is_fence_aware() -> None:
    assert isinstance(LedgerTargetClient("http://127.0.0.1:1"), FenceAware)
