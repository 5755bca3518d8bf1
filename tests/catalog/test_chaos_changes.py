"""Chaos makes its infrastructure changes through the catalog's calls: one event per change, none twice."""

from __future__ import annotations

import pytest

from baton.catalog.changes import (
    CatalogChangeKind,
    catalog_changes_since,
    current_placements,
    withdraw_release,
)
from baton.chaos_catalog import CHAOS_ACTOR, record_chaos, refilled_image
from baton.catalog.releases import BETTER_RELEASE, RELEASES
from baton.chaos import ChaosEvent, ChaosReason, ChaosSchedule, affected_placements
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.store.base import SqlStore

NAMES = [p.name for p in DEFAULT_PLACEMENTS]
V8 = RELEASES[BETTER_RELEASE]


def _event(reason: ChaosReason, source: str, event_id: str = "chaos-1-000") -> ChaosEvent:
    placement = placement_named(DEFAULT_PLACEMENTS, source)
    return ChaosEvent(
        event_id=event_id, at_s=1.0, reason=reason, source_placement=source,
        affected=affected_placements(reason, placement, DEFAULT_PLACEMENTS), preferred_targets=(),
        kill_worker=reason.kills_worker,
        target_release_id=V8.release_id if reason is ChaosReason.BETTER_MODEL_RELEASED else None,
    )


def _last_seq(store: SqlStore) -> int:
    return catalog_changes_since(store, 0)[-1].seq


def test_gpu_reclaimed_takes_the_accelerator_once(store: SqlStore) -> None:
    start = _last_seq(store)
    (change,) = record_chaos(store, _event(ChaosReason.GPU_RECLAIMED, "local-gpu-eu"), NAMES)
    assert change.kind is CatalogChangeKind.PLACEMENT_UPDATED and change.actor == CHAOS_ACTOR
    assert change.placement == "local-gpu-eu" and not change.environment_changed
    assert placement_named(current_placements(store), "local-gpu-eu").accelerator == "none"
    assert record_chaos(store, _event(ChaosReason.GPU_RECLAIMED, "local-gpu-eu", "chaos-1-001"), NAMES) == []
    assert [c.seq for c in catalog_changes_since(store, start)] == [change.seq]


def test_browser_pool_drained_changes_the_environment(store: SqlStore) -> None:
    before = placement_named(current_placements(store), "browser-pool-eu").environment
    (change,) = record_chaos(store, _event(ChaosReason.BROWSER_POOL_DRAINED, "browser-pool-eu", "chaos-1-004"), NAMES)
    after = placement_named(current_placements(store), "browser-pool-eu").environment
    assert after.runtime_image == refilled_image(before.runtime_image, "chaos-1-004") != before.runtime_image
    assert change.environment_changed and change.environment_id_after == after.environment_id
    (again,) = record_chaos(store, _event(ChaosReason.BROWSER_POOL_DRAINED, "browser-pool-eu", "chaos-1-005"), NAMES)
    assert again.environment_id_before == after.environment_id and again.seq > change.seq
    assert placement_named(current_placements(store), "browser-pool-eu").environment.runtime_image == (
        refilled_image(before.runtime_image, "chaos-1-005"))


def test_better_model_publishes_where_it_is_missing(store: SqlStore) -> None:
    event = _event(ChaosReason.BETTER_MODEL_RELEASED, "local-gpu-eu")
    assert record_chaos(store, event, NAMES) == []  # today's catalog offers it everywhere already
    withdraw_release(store, V8.release_id)
    (change,) = record_chaos(store, event, NAMES)
    assert change.kind is CatalogChangeKind.RELEASE_PUBLISHED and change.release_id == V8.release_id
    assert set(change.placements) == set(NAMES) and change.actor == CHAOS_ACTOR
    assert all(V8.release_id in p.supported_release_ids for p in current_placements(store))


@pytest.mark.parametrize("reason", [ChaosReason.PROVIDER_UNHEALTHY, ChaosReason.REGION_CAPACITY_LOST,
                                    ChaosReason.SCHEDULER_REBALANCE])
def test_health_and_capacity_are_not_catalog_data(store: SqlStore, reason: ChaosReason) -> None:
    start = _last_seq(store)
    assert record_chaos(store, _event(reason, "cloud-eu"), NAMES) == []
    assert catalog_changes_since(store, start) == []


def test_every_reason_of_a_schedule_is_handled(store: SqlStore) -> None:
    runs = {f"run-{i}": name for i, name in enumerate(NAMES)}
    schedule = ChaosSchedule.generate(7, 10.0, list(DEFAULT_PLACEMENTS), runs)
    assert schedule.reasons == frozenset(ChaosReason)
    start = _last_seq(store)
    made = [change for event in schedule.events for change in record_chaos(store, event, NAMES)]
    assert [c.seq for c in catalog_changes_since(store, start)] == [c.seq for c in made]
    assert all(c.actor == CHAOS_ACTOR and c.reason and "chaos-7-" in c.reason for c in made)
