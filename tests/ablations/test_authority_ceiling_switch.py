"""authority-ceiling: the authority refuses to issue above a placement's ceiling as the store's catalog has it when
asked, so an operator's lowered ceiling binds the next capability; with the switch off, it issues anyway.

The placement is the built-in catalog's `local-gpu-eu` (EXTERNAL_MUTATE), seeded into the store the way the fleet
seeds it. The oracle is the catalog the operator changed, read here through the store's own rows, not through the
authority.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest

from baton.ablation import Ablation, ablation_env
from baton.authority import AuthorityService
from baton.authority_http import CapabilityRequest, decide
from baton.catalog.changes import update_placement
from baton.catalog.seed import seed_catalog
from baton.errors import AuthorityDeniedError
from baton.models import AuthorityLevel
from baton.placements import DEFAULT_PLACEMENTS
from baton.store.base import SqlStore

from . import rig

PLACEMENT = "local-gpu-eu"
LEVEL = AuthorityLevel.SANDBOX_MUTATE


def _ask(store: SqlStore, key: str) -> CapabilityRequest:
    lease = rig.start_run(store, run_id=f"run-{key}")
    return CapabilityRequest(run_id=lease.run_id, epoch=lease.epoch, owner=lease.owner, operation=rig.OPERATION,
                             artifact_hash=rig.ARTIFACT, level=LEVEL, placement=PLACEMENT,
                             context=rig.approved(store), idempotency_key=key)


def test_the_built_in_placement_allows_the_level_before_the_change(store: SqlStore, authority: AuthorityService) -> None:
    seed_catalog(store, DEFAULT_PLACEMENTS)
    ceiling = {p.name: p for p in store.catalog_placements()}[PLACEMENT].authority_ceiling
    assert ceiling.allows(LEVEL)
    assert decide(authority, store, None, _ask(store, "k1")).claims.level is LEVEL


@pytest.mark.parametrize("ablated", [False, True], ids=["check-on", "check-off"])
def test_a_ceiling_lowered_in_the_catalog_binds_the_next_capability(store: SqlStore, authority: AuthorityService,
                                                                   ablated: bool) -> None:
    seed_catalog(store, DEFAULT_PLACEMENTS)
    update_placement(store, PLACEMENT, authority_ceiling=AuthorityLevel.VERIFY, actor="operator")
    lowered = {p.name: p for p in store.catalog_placements()}[PLACEMENT].authority_ceiling
    assert not lowered.allows(LEVEL)  # the operator's record says this level may no longer be held there
    with ablation_env(Ablation.AUTHORITY_CEILING.value) if ablated else nullcontext():
        if ablated:
            assert decide(authority, store, None, _ask(store, "k2")).claims.level is LEVEL
        else:
            with pytest.raises(AuthorityDeniedError, match=f"ceiling {AuthorityLevel.VERIFY.value}"):
                decide(authority, store, None, _ask(store, "k2"))


def test_a_catalog_given_to_the_service_is_read_as_given(store: SqlStore, authority: AuthorityService) -> None:
    """An explicit catalog (`--catalog FILE`, e.g. the gateway benchmark's one placement) is the service's word."""
    seed_catalog(store, DEFAULT_PLACEMENTS)
    update_placement(store, PLACEMENT, authority_ceiling=AuthorityLevel.VERIFY, actor="operator")
    given = {p.name: p for p in DEFAULT_PLACEMENTS}
    assert decide(authority, store, given, _ask(store, "k3")).claims.level is LEVEL
    with pytest.raises(AuthorityDeniedError, match="not in the authority's catalog"):
        decide(authority, store, {}, _ask(store, "k4"))
