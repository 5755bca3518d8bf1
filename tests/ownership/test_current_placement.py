"""A standing worker's gateway caps requests at its placement's ceiling as the catalog has it at each resume, not at
the copy it read when it started (an operator may lower the ceiling while the worker runs)."""

from __future__ import annotations

import pytest
from builders.authority import TARGET, capability, new_run, request

from baton.authority import AuthorityService
from baton.catalog.changes import current_placements, update_placement
from baton.errors import CapabilityError
from baton.gateway import MutationGateway
from baton.handoff.coordinator import Coordinator
from baton.models import AuthorityLevel, Placement
from baton.placements import placement_named
from baton.runtime.executor import RunExecutor
from baton.runtime.services import RuntimeServices
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.targets.ledger_target import LedgerTargetProcess

PLACEMENT = "cloud-eu"


def _executor(store: SqlStore, blobs: BlobStore, authority: AuthorityService, ceiling: AuthorityLevel | None,
              ledger: LedgerTargetProcess) -> RunExecutor:
    client = ledger.client()
    started_on: Placement = placement_named(current_placements(store), PLACEMENT)
    services = RuntimeServices(store=store, blobs=blobs, authority=authority,
                               gateway=MutationGateway(store, authority, {TARGET: client}, ceiling=ceiling),
                               targets={TARGET: client}, releases={})
    return RunExecutor(services, started_on, "w1", agent_for=lambda kind: lambda ctx: None, lease_ttl_s=30.0,
                       placement_of=lambda name: placement_named(current_placements(store), name))


@pytest.mark.integration
def test_a_lowered_ceiling_reaches_the_standing_workers_gateway(
    store: SqlStore, blobs: BlobStore, authority: AuthorityService, ledger_service: LedgerTargetProcess
) -> None:
    executor = _executor(store, blobs, authority, AuthorityLevel.EXTERNAL_MUTATE, ledger_service)
    run_id = new_run(store)
    lease = Coordinator(store).grant(run_id, "w1", ttl_s=60)
    assert lease is not None
    in_hand = capability(authority, store, lease)  # issued while the ceiling still allowed deploying
    update_placement(store, PLACEMENT, authority_ceiling=AuthorityLevel.SANDBOX_MUTATE, actor="operator")
    assert executor.services.gateway.ceiling is AuthorityLevel.EXTERNAL_MUTATE  # nothing resumed yet

    assert executor.current_placement().authority_ceiling is AuthorityLevel.SANDBOX_MUTATE
    assert executor.services.gateway.ceiling is AuthorityLevel.SANDBOX_MUTATE
    with pytest.raises(CapabilityError) as refused:
        executor.services.gateway.submit(request(lease, in_hand, "deploy-1", {"n": 1}, process="w1"))
    assert "ceiling" in str(refused.value)
    assert store.list_operations(run_id) == []
    assert [e for e in ledger_service.effects() if e.run_id == run_id] == []


@pytest.mark.integration
def test_a_gateway_without_a_ceiling_is_left_without_one(
    store: SqlStore, blobs: BlobStore, authority: AuthorityService, ledger_service: LedgerTargetProcess
) -> None:
    executor = _executor(store, blobs, authority, None, ledger_service)
    update_placement(store, PLACEMENT, authority_ceiling=AuthorityLevel.SANDBOX_MUTATE, actor="operator")
    assert executor.current_placement().authority_ceiling is AuthorityLevel.SANDBOX_MUTATE
    assert executor.services.gateway.ceiling is None
