"""A live fleet reads its placements from the store's catalog, and its chaos changes the catalog through events."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.catalog.changes import CatalogChangeKind, catalog_changes_since, current_placements
from baton.chaos_catalog import CHAOS_ACTOR
from baton.fleet import FleetConfig, run_fleet
from baton.placements import placement_named
from baton.store.factory import open_store

pytestmark = pytest.mark.integration


def test_fleet_chaos_changes_reach_the_event_log(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary = run_fleet(FleetConfig(runs=6, workers=3, chaos=True, seed=1, home=home, timeout_s=120.0,
                                    boundary_pause_s=0.25, chaos_window_s=6.0, launch_interval_s=0.5))
    assert summary.active == 0 and summary.checker_violations == []
    with open_store(None, home) as store:
        changes = catalog_changes_since(store, 0)
        placements = current_placements(store)
    seeded = [c for c in changes if c.seeded]
    by_chaos = [c for c in changes if c.actor == CHAOS_ACTOR]
    assert seeded and len(seeded) + len(by_chaos) == len(changes)  # nobody else changed the catalog
    fired = summary.chaos_events
    if fired.get("gpu_reclaimed"):
        assert placement_named(placements, "local-gpu-eu").accelerator == "none"
        assert any(c.placement == "local-gpu-eu" and c.kind is CatalogChangeKind.PLACEMENT_UPDATED for c in by_chaos)
    drained = [c for c in by_chaos if c.placement == "browser-pool-eu" and c.environment_changed]
    assert len(drained) == fired.get("browser_pool_drained", 0)
    assert placement_named(placements, "browser-pool-eu").environment.runtime_image.startswith("baton-browser:2.0")
    assert fired.get("gpu_reclaimed") or fired.get("browser_pool_drained"), fired  # the test saw a change
