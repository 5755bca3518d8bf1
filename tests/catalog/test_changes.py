"""The catalog contract on both backends: one event per call, cursors, A -> B -> A, bad input writes nothing."""

from __future__ import annotations

import pytest

from baton.catalog.changes import (
    CATALOG_EVENT_RUN_ID,
    CatalogChangeKind,
    catalog_changes_since,
    current_placements,
    current_releases,
    publish_release,
    release_manifests,
    update_placement,
    withdraw_release,
)
from baton.catalog.releases import BETTER_RELEASE, OLDER_RELEASE, RELEASES
from baton.catalog.seed import seed_catalog
from baton.errors import (
    CatalogConflictError,
    CatalogError,
    InvalidRefError,
    StoreError,
    UnknownPlacementError,
    UnknownReleaseError,
)
from baton.models import AuthorityLevel, BehavioralRelease, Event, EventType, RunKind
from baton.placements import DEFAULT_PLACEMENTS
from baton.store.base import SqlStore

V7, V8 = RELEASES[OLDER_RELEASE], RELEASES[BETTER_RELEASE]
V9 = V8.model_copy(update={"prompt_bundle": "reference-prompts-4"})


def _seq(store: SqlStore) -> int:
    events = store.list_events()
    return events[-1][0] if events else 0


def _snapshot(store: SqlStore) -> tuple[object, ...]:
    """Everything a refused call must leave as it was."""
    return (store.list_events(), store.catalog_placements(offered_only=False), store.catalog_releases())


@pytest.fixture
def seeded(store: SqlStore) -> SqlStore:
    seed_catalog(store)
    return store


def test_seed_is_todays_catalog_once(store: SqlStore) -> None:
    seqs = seed_catalog(store)
    assert len(seqs) == len(RELEASES) + len(DEFAULT_PLACEMENTS)
    assert seed_catalog(store) == []
    assert current_placements(store) == sorted(DEFAULT_PLACEMENTS, key=lambda p: p.name)
    releases = {release.name: release for release in current_releases(store)}
    assert {name: release.manifest for name, release in releases.items()} == dict(RELEASES)
    assert releases[OLDER_RELEASE].offered_by == ("browser-pool-eu", "cloud-eu", "local-gpu-eu")
    changes = catalog_changes_since(store, 0)
    assert [change.seq for change in changes] == seqs
    assert all(change.seeded and not change.environment_changed for change in changes)


def test_reads_seed_an_empty_catalog(store: SqlStore) -> None:
    assert [p.name for p in current_placements(store)] == sorted(p.name for p in DEFAULT_PLACEMENTS)
    assert len(catalog_changes_since(store, 0)) == len(RELEASES) + len(DEFAULT_PLACEMENTS)


def test_update_placement_appends_one_event(seeded: SqlStore) -> None:
    before = _seq(seeded)
    old = next(p for p in current_placements(seeded) if p.name == "cloud-eu")
    change = update_placement(seeded, "cloud-eu", runtime_image="baton-worker:1.6", tool_versions={"python": "3.12"},
                              actor="test", reason="image upgrade")
    events = seeded.list_events(after_seq=before)
    assert [seq for seq, _ in events] == [change.seq] and change.seq > before
    assert events[0][1].event_type is EventType.PLACEMENT_UPDATED and events[0][1].run_id == CATALOG_EVENT_RUN_ID
    new = next(p for p in current_placements(seeded) if p.name == "cloud-eu")
    assert new.environment.runtime_image == "baton-worker:1.6"
    assert new.environment.tool_versions["python"] == "3.12"
    assert new.environment.tool_versions["corpus-client"] == old.environment.tool_versions["corpus-client"]
    assert change.kind is CatalogChangeKind.PLACEMENT_UPDATED and change.placement == "cloud-eu"
    assert change.environment_id_before == old.environment.environment_id
    assert change.environment_id_after == new.environment.environment_id != old.environment.environment_id
    assert change.environment_changed and change.reason == "image upgrade" and change.actor == "test"


def test_region_moves_placement_and_environment_together(seeded: SqlStore) -> None:
    change = update_placement(seeded, "cloud-us", region="us-west")
    moved = next(p for p in current_placements(seeded) if p.name == "cloud-us")
    assert moved.region == moved.environment.region == "us-west"
    assert change.environment_changed


def test_ceiling_change_keeps_the_environment_id(seeded: SqlStore) -> None:
    change = update_placement(seeded, "cloud-eu", authority_ceiling=AuthorityLevel.SANDBOX_MUTATE)
    assert change.environment_id_before == change.environment_id_after and not change.environment_changed
    placement = next(p for p in current_placements(seeded) if p.name == "cloud-eu")
    assert placement.authority_ceiling is AuthorityLevel.SANDBOX_MUTATE


def test_environment_a_b_a_gives_distinct_seqs(seeded: SqlStore) -> None:
    start = _seq(seeded)
    image = next(p for p in current_placements(seeded) if p.name == "cloud-eu").environment.runtime_image
    to_b = update_placement(seeded, "cloud-eu", runtime_image="baton-worker:9.9")
    back_to_a = update_placement(seeded, "cloud-eu", runtime_image=image)
    assert start < to_b.seq < back_to_a.seq
    assert back_to_a.environment_id_after == to_b.environment_id_before
    assert back_to_a.environment_id_before == to_b.environment_id_after
    assert [c.seq for c in catalog_changes_since(seeded, start)] == [to_b.seq, back_to_a.seq]


def test_publish_new_release_lists_it_on_placements(seeded: SqlStore) -> None:
    before = _seq(seeded)
    change = publish_release(seeded, V9, name="model-v9", placements=["cloud-us", "cloud-eu"], reason="rollout")
    assert [seq for seq, _ in seeded.list_events(after_seq=before)] == [change.seq]
    assert change.kind is CatalogChangeKind.RELEASE_PUBLISHED and change.release_id == V9.release_id
    assert change.placements == ("cloud-eu", "cloud-us") and change.release_name == "model-v9"
    released = {r.name: r for r in current_releases(seeded)}["model-v9"]
    assert released.published and released.offered_by == ("cloud-eu", "cloud-us")
    offering = {p.name for p in current_placements(seeded) if V9.release_id in p.supported_release_ids}
    assert offering == {"cloud-eu", "cloud-us"}
    assert release_manifests(seeded)[V9.release_id] == V9


def test_withdraw_then_publish_again(seeded: SqlStore) -> None:
    start = _seq(seeded)
    withdrawn = withdraw_release(seeded, V7.release_id, reason="bad prompts")
    assert [seq for seq, _ in seeded.list_events(after_seq=start)] == [withdrawn.seq]
    assert withdrawn.kind is CatalogChangeKind.RELEASE_WITHDRAWN and withdrawn.release_id == V7.release_id
    assert withdrawn.placements == ("browser-pool-eu", "cloud-eu", "local-gpu-eu")
    assert all(V7.release_id not in p.supported_release_ids for p in current_placements(seeded))
    record = {r.release_id: r for r in current_releases(seeded)}[V7.release_id]
    assert not record.published and record.offered_by == ()
    assert V7.release_id in release_manifests(seeded)  # runs pinned to it can still read their manifest
    again = publish_release(seeded, V7.release_id)
    assert start < withdrawn.seq < again.seq and again.release_name == OLDER_RELEASE
    offering = sorted(p.name for p in current_placements(seeded) if V7.release_id in p.supported_release_ids)
    assert offering == ["browser-pool-eu", "cloud-eu", "local-gpu-eu"]
    assert [c.kind for c in catalog_changes_since(seeded, start)] == [
        CatalogChangeKind.RELEASE_WITHDRAWN, CatalogChangeKind.RELEASE_PUBLISHED]


def test_publish_known_release_on_one_more_placement(seeded: SqlStore) -> None:
    change = publish_release(seeded, V7.release_id, placements=["cloud-us"])
    assert "cloud-us" in change.placements
    cloud_us = next(p for p in current_placements(seeded) if p.name == "cloud-us")
    assert V7.release_id in cloud_us.supported_release_ids


def test_cursors_page_through_changes_and_skip_run_events(seeded: SqlStore) -> None:
    start = _seq(seeded)
    first = update_placement(seeded, "cloud-eu", runtime_image="img:1")
    seeded.create_run("run-1", RunKind.RESEARCH, V8.release_id, "cloud-eu")
    run_seq = seeded.append_event(Event(event_type=EventType.RUN_CREATED, run_id="run-1", at=seeded.db_now()))
    second = withdraw_release(seeded, V7.release_id)
    third = update_placement(seeded, "cloud-us", runtime_image="img:2")
    assert first.seq < run_seq < second.seq < third.seq  # one sequence for run and catalog events
    assert [c.seq for c in catalog_changes_since(seeded, start)] == [first.seq, second.seq, third.seq]
    assert [c.seq for c in catalog_changes_since(seeded, start, limit=2)] == [first.seq, second.seq]
    assert [c.seq for c in catalog_changes_since(seeded, second.seq)] == [third.seq]
    assert catalog_changes_since(seeded, third.seq) == []
    assert [c.seq for c in catalog_changes_since(seeded, run_seq)] == [second.seq, third.seq]


@pytest.mark.parametrize("call, error", [
    (lambda s: update_placement(s, "mars-1", runtime_image="x"), UnknownPlacementError),
    (lambda s: update_placement(s, "cloud-eu"), CatalogError),
    (lambda s: update_placement(s, "cloud-eu", region="eu-central"), CatalogConflictError),
    (lambda s: update_placement(s, "cloud-eu", authority_ceiling="GODMODE"), ValueError),
    (lambda s: publish_release(s, V9, name="model-v9", placements=["cloud-eu", "mars-1"]), UnknownPlacementError),
    (lambda s: publish_release(s, V9, placements=["cloud-eu"]), CatalogError),
    (lambda s: publish_release(s, V9, name="model-v8", placements=["cloud-eu"]), CatalogConflictError),
    (lambda s: publish_release(s, V9, name="../etc", placements=["cloud-eu"]), CatalogError),
    (lambda s: publish_release(s, V8.release_id, placements=["cloud-eu"]), CatalogConflictError),
    (lambda s: publish_release(s, V7, name="model-v7-again"), CatalogConflictError),
    (lambda s: publish_release(s, V9.release_id), UnknownReleaseError),
    (lambda s: publish_release(s, "model-v8"), InvalidRefError),
    (lambda s: withdraw_release(s, "sha256:" + "0" * 64), UnknownReleaseError),
    (lambda s: withdraw_release(s, "sha256:ABC"), InvalidRefError),
    (lambda s: withdraw_release(s, "../../model-v7"), InvalidRefError),
])
def test_bad_input_raises_and_writes_nothing(seeded: SqlStore, call: object, error: type[Exception]) -> None:
    before = _snapshot(seeded)
    with pytest.raises(error):
        call(seeded)  # type: ignore[operator]
    assert _snapshot(seeded) == before


def test_withdrawing_twice_is_refused(seeded: SqlStore) -> None:
    withdraw_release(seeded, V7.release_id)
    before = _snapshot(seeded)
    with pytest.raises(CatalogConflictError, match="withdrawn already"):
        withdraw_release(seeded, V7.release_id)
    assert _snapshot(seeded) == before


def test_bad_cursor_is_refused(seeded: SqlStore) -> None:
    with pytest.raises(StoreError):
        catalog_changes_since(seeded, -1)
    with pytest.raises(StoreError):
        catalog_changes_since(seeded, 0, limit=0)


def test_the_catalog_run_id_is_reserved(store: SqlStore) -> None:
    with pytest.raises(StoreError, match="reserved"):
        store.create_run(CATALOG_EVENT_RUN_ID, RunKind.RESEARCH, V8.release_id, "cloud-eu")


def test_a_manifest_is_a_behavioral_release(seeded: SqlStore) -> None:
    # The id is always computed from the manifest: a publish cannot claim another release's id.
    change = publish_release(seeded, BehavioralRelease(**{**V9.model_dump(), "model": "scripted-model-v7"}),
                             name="odd", placements=["cloud-eu"])
    assert change.release_id != V9.release_id and change.release_id == release_manifests(seeded)[
        change.release_id].release_id
