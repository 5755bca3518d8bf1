"""The ablation switches: parsed strictly, scoped, and refused by production entry points."""

from __future__ import annotations

import pytest

from baton.ablation import (
    ENV_VAR,
    Ablation,
    AblationActive,
    UnknownAblation,
    ablation_env,
    active_ablations,
    gate_reason_ablated,
    is_ablated,
    refuse_if_ablated,
)


def test_nothing_is_ablated_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert active_ablations() == frozenset()
    assert not any(is_ablated(member) for member in Ablation)
    refuse_if_ablated("baton platform")


def test_ablation_env_switches_one_protection_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    with ablation_env(Ablation.IDEMPOTENCY.value, "gate:release_incompatible"):
        assert is_ablated(Ablation.IDEMPOTENCY)
        assert not is_ablated(Ablation.GATEWAY_EPOCH)
        assert gate_reason_ablated("release_incompatible")
        assert not gate_reason_ablated("migration_unsafe")
        with pytest.raises(AblationActive, match="idempotency"):
            refuse_if_ablated("baton fleet")
    assert active_ablations() == frozenset()


def test_unknown_names_are_refused_with_the_known_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "gateway-epoch,no-such-check")
    with pytest.raises(UnknownAblation, match="no-such-check"):
        is_ablated(Ablation.GATEWAY_EPOCH)
    with pytest.raises(UnknownAblation):
        with ablation_env("gate:../etc"):
            pass
