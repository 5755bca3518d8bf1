"""Invariants 6-8 over a checkpoint chain: a clean SDK run passes, hand-made bad links are caught."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from baton.agents.verifiers import Verdict
from baton.checkpoints import restore, seal_checkpoint
from baton.models import AuthorityLevel, Boundary, BudgetUsage, ResumabilityClass, VerdictResult
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.chain_checks import chain_violations
from baton.runtime.services import RuntimeServices

from builders.runtime import MemoryTarget, adopt, launch, make_services


@pytest.fixture
def services(tmp_path: Path) -> Iterator[RuntimeServices]:
    made = make_services(tmp_path, MemoryTarget())
    try:
        yield made
    finally:
        made.store.close()


def _append(services: RuntimeServices, boundary: Boundary, **changes: object) -> None:
    """Seal one more checkpoint by hand, with `changes` applied to the latest parts."""
    store = services.store
    latest = store.latest_checkpoint("run-1")
    assert latest is not None
    parts = dataclasses.replace(restore(services.blobs, latest).parts, **changes)  # type: ignore[arg-type]
    seal_checkpoint(store, services.blobs, run_id="run-1", parts=parts, new_observations=(), parent=latest,
                    boundary=boundary, resumability=ResumabilityClass.R2, resumability_reasons=(),
                    owner_epoch=store.current_epoch("run-1"), sealed_at=store.db_now())


def test_a_run_driven_through_the_sdk_keeps_invariants_6_to_8(services: RuntimeServices) -> None:
    launch(services)
    ctx = adopt(services)
    ctx.charge(BudgetUsage(model_calls=1), "a call")
    ctx.propose(b"spec", kind="deployment-spec")
    ctx.verify(lambda data: Verdict(VerdictResult.PASS, "ok", "check-1"))
    ctx.request_approval("deploy", level=AuthorityLevel.EXTERNAL_MUTATE)
    assert chain_violations(services.store, services.blobs, "run-1") == []


def test_verified_without_evidence_and_a_shrinking_budget_are_reported(services: RuntimeServices) -> None:
    launch(services)
    latest = services.store.latest_checkpoint("run-1")
    assert latest is not None
    parts = restore(services.blobs, latest).parts
    _append(services, Boundary.GENERATING, budget=parts.budget.charge(BudgetUsage(model_spend_usd=Decimal("1"))))
    _append(services, Boundary.VERIFIED, budget=parts.budget)  # no evidence, and usage went back down
    found = chain_violations(services.store, services.blobs, "run-1")
    assert any(line.startswith("invariant 6") for line in found)
    assert any(line.startswith("invariant 8") for line in found)


def test_authority_above_the_ceiling_or_raised_by_a_move_is_reported(services: RuntimeServices) -> None:
    launch(services)
    latest = services.store.latest_checkpoint("run-1")
    assert latest is not None
    parts = restore(services.blobs, latest).parts
    pool = placement_named(DEFAULT_PLACEMENTS, "browser-pool-eu")
    _append(services, Boundary.GENERATING, placement=pool)  # kept EXTERNAL_MUTATE on a SANDBOX pool
    low = parts.authority.model_copy(update={"level": AuthorityLevel.PLAN})
    _append(services, Boundary.GENERATING, authority=low, placement=pool)
    _append(services, Boundary.GENERATING, authority=parts.authority, placement=parts.placement)  # raised by a move
    found = chain_violations(services.store, services.blobs, "run-1")
    assert any("above the ceiling of browser-pool-eu" in line for line in found)
    assert any("gained EXTERNAL_MUTATE over PLAN" in line for line in found)


def test_launching_above_the_placement_ceiling_is_refused(services: RuntimeServices) -> None:
    with pytest.raises(ValueError, match="ceiling"):
        launch(services, placement="browser-pool-eu")
