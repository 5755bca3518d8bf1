"""Workers read release manifests from the store's catalog, including releases published after they started."""

from __future__ import annotations

import pytest

from baton.catalog.changes import publish_release, withdraw_release
from baton.catalog.manifests import CatalogManifests
from baton.catalog.releases import OLDER_RELEASE, RELEASES
from baton.store.base import SqlStore

from builders.fixtures import Backend

V7 = RELEASES[OLDER_RELEASE]
V9 = V7.model_copy(update={"model": "scripted-model-v8", "prompt_bundle": "reference-prompts-4"})


def test_manifests_follow_the_catalog(store: SqlStore, backend: Backend) -> None:
    manifests = CatalogManifests(store)
    assert dict(manifests) == {release.release_id: release for release in RELEASES.values()}
    with pytest.raises(KeyError):
        manifests[V9.release_id]
    with backend.open() as elsewhere:  # another process publishes
        publish_release(elsewhere, V9, name="model-v9", placements=["cloud-us"])
        withdraw_release(elsewhere, V7.release_id)
    assert manifests[V9.release_id] == V9
    assert manifests[V7.release_id] == V7  # withdrawn, still readable by runs pinned to it
    assert len(manifests) == 3
