"""Seeding the store's catalog from today's catalog, once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from baton.catalog.releases import RELEASES
from baton.errors import UnknownPlacementError
from baton.models import BehavioralRelease, Placement
from baton.placements import DEFAULT_PLACEMENTS
from baton.store.base import SqlStore

SEED_ACTOR = "catalog-seed"


def seed_catalog(
    store: SqlStore,
    placements: Sequence[Placement] = DEFAULT_PLACEMENTS,
    releases: Mapping[str, BehavioralRelease] = RELEASES,
) -> list[int]:
    """Write `placements` and `releases` into an empty catalog; return the seqs of its events.

    A catalog that holds anything already is left as it is ([] is returned),
    so every process may call this on start: the first one seeds, atomically.
    """
    if store.catalog_placements(offered_only=False) or store.catalog_releases():
        return []
    return store.seed_catalog_rows(placements, releases, actor=SEED_ACTOR)


def hosted_placements(store: SqlStore, seed: Sequence[Placement], names: Sequence[str]) -> dict[str, Placement]:
    """The store's current record of each placement in `names` (seeding an empty catalog with `seed` first).

    UnknownPlacementError names a placement the store's catalog lacks (it was
    seeded from another catalog: change it with `baton placement ...`).
    """
    seed_catalog(store, seed)
    catalog = {placement.name: placement for placement in store.catalog_placements()}
    missing = sorted(set(names) - set(catalog))
    if missing:
        raise UnknownPlacementError(f"the store's catalog has no placement {missing}; it has {sorted(catalog)}")
    return {name: catalog[name] for name in names}
