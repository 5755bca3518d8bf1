"""What a placement can host (readable schema versions, verifier bundles, tool contracts) changes by catalog call."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from baton.catalog.changes import catalog_changes_since, current_placements, update_placement
from baton.catalog.seed import seed_catalog
from baton.errors import CatalogConflictError, CatalogError
from baton.store.base import SqlStore


@pytest.fixture
def seeded(store: SqlStore) -> SqlStore:
    seed_catalog(store)
    return store


def _placement(store: SqlStore, name: str):  # type: ignore[no-untyped-def]
    return next(p for p in current_placements(store) if p.name == name)


def test_readable_schemas_are_replaced_with_one_event(seeded: SqlStore) -> None:
    before = seeded.list_events()[-1][0]
    change = update_placement(seeded, "cloud-eu", readable_schema_versions=["1", "2"], actor="operator", reason="old image")
    assert [seq for seq, _ in seeded.list_events(after_seq=before)] == [change.seq]
    assert _placement(seeded, "cloud-eu").readable_schema_versions == ("1", "2")
    event = seeded.list_events(after_seq=before)[0][1]
    assert event.detail["changes"] == {"readable_schema_versions": [["3"], ["1", "2"]]}
    assert not change.environment_changed  # what a placement hosts is not its environment identity


def test_verifiers_and_tools_are_replaced(seeded: SqlStore) -> None:
    old = _placement(seeded, "cloud-eu")
    update_placement(seeded, "cloud-eu", verifiers=["citations-1"], tools=["python"])
    new = _placement(seeded, "cloud-eu")
    assert new.verifiers == ("citations-1",) and new.tools == ("python",)
    assert new.readable_schema_versions == old.readable_schema_versions and new.region == old.region
    assert [c.placement for c in catalog_changes_since(seeded, 0) if not c.seeded] == ["cloud-eu"]


def test_the_same_lists_again_change_nothing(seeded: SqlStore) -> None:
    current = _placement(seeded, "cloud-eu").verifiers
    with pytest.raises(CatalogConflictError):
        update_placement(seeded, "cloud-eu", verifiers=list(current))


@pytest.mark.parametrize("bad", [[""], ["3", "3"]])
def test_bad_lists_are_refused_and_write_nothing(seeded: SqlStore, bad: list[str]) -> None:
    events = seeded.list_events()
    with pytest.raises(ValidationError):
        update_placement(seeded, "cloud-eu", readable_schema_versions=bad)
    assert seeded.list_events() == events


def test_a_bare_string_is_refused(seeded: SqlStore) -> None:
    with pytest.raises(CatalogError, match="list of names"):
        update_placement(seeded, "cloud-eu", verifiers="citations-1")  # type: ignore[arg-type]
