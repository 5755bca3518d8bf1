"""Seeding the store's catalog from today's catalog, once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from baton.catalog.releases import RELEASES
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
