"""The store's catalog tables on every backend: atomic seeding, one event per change, history append-only."""

from __future__ import annotations

import threading

import pytest

from baton.catalog.placement_update import PlacementUpdate
from baton.catalog.releases import RELEASES
from baton.errors import AppendOnlyViolation, UnknownReleaseError
from baton.models import EventType
from baton.models.events import CATALOG_EVENT_RUN_ID
from baton.placements import DEFAULT_PLACEMENTS
from baton.store.base import SqlStore

from builders.fixtures import Backend


def test_concurrent_seeders_seed_once(backend: Backend) -> None:
    results: list[object] = []
    barrier = threading.Barrier(4)

    def seeder() -> None:
        with backend.open() as opened:
            barrier.wait()
            try:
                results.append(opened.seed_catalog_rows(DEFAULT_PLACEMENTS, RELEASES, actor="test"))
            except Exception as exc:  # noqa: BLE001 - reported below
                results.append(exc)

    threads = [threading.Thread(target=seeder) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(len(r) for r in results if isinstance(r, list)) == [0, 0, 0, len(RELEASES) + len(DEFAULT_PLACEMENTS)]
    with backend.open() as store:
        assert len(store.list_events(run_id=CATALOG_EVENT_RUN_ID)) == len(RELEASES) + len(DEFAULT_PLACEMENTS)
        assert len(store.catalog_placements()) == len(DEFAULT_PLACEMENTS)


def test_seed_refuses_placements_listing_unknown_releases(store: SqlStore) -> None:
    with pytest.raises(UnknownReleaseError):
        store.seed_catalog_rows(DEFAULT_PLACEMENTS, {"model-v8": RELEASES["model-v8"]}, actor="test")
    assert store.list_events() == [] and store.catalog_placements(offered_only=False) == []


def test_rows_name_the_event_that_changed_them(store: SqlStore) -> None:
    store.seed_catalog_rows(DEFAULT_PLACEMENTS, RELEASES, actor="test")
    seq = store.catalog_update_placement("cloud-eu", PlacementUpdate(runtime_image="img:2"), actor="t", reason=None)
    rows = store.execute_raw("SELECT changed_seq, environment_id FROM catalog_placements WHERE name = 'cloud-eu'")
    placement = next(p for p in store.catalog_placements() if p.name == "cloud-eu")
    assert rows == [(seq, placement.environment.environment_id)]
    (event_seq, event), = store.list_events(after_seq=seq - 1)
    assert event_seq == seq and event.event_type is EventType.PLACEMENT_UPDATED


def test_catalog_events_are_append_only(store: SqlStore) -> None:
    store.seed_catalog_rows(DEFAULT_PLACEMENTS, RELEASES, actor="test")
    with pytest.raises(AppendOnlyViolation):
        store.execute_raw("UPDATE events SET event_type = 'x' WHERE run_id = ?", (CATALOG_EVENT_RUN_ID,))
    with pytest.raises(AppendOnlyViolation):
        store.execute_raw("DELETE FROM events WHERE run_id = ?", (CATALOG_EVENT_RUN_ID,))
