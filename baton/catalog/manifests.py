"""Release manifests read from the store's catalog, for workers.

A release id is the hash of its manifest, so a manifest once read never
changes: the mapping caches what it has read and asks the store again only for
an id it has not seen (a release published after the worker started).
Withdrawn releases stay readable, since runs pinned to them still need them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

from baton.catalog.changes import release_manifests
from baton.models import BehavioralRelease
from baton.store.base import SqlStore


class CatalogManifests(Mapping[str, BehavioralRelease]):
    """Release id -> manifest, as the store's catalog knows them now (thread safe)."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._known: dict[str, BehavioralRelease] = {}

    def _refresh(self) -> dict[str, BehavioralRelease]:
        fresh = release_manifests(self._store)
        with self._lock:
            self._known.update(fresh)
            return dict(self._known)

    def __getitem__(self, release_id: str) -> BehavioralRelease:
        with self._lock:
            found = self._known.get(release_id)
        if found is not None:
            return found
        return self._refresh()[release_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._refresh())

    def __len__(self) -> int:
        return len(self._refresh())
