"""Today's catalog of behavioral releases: the seed of the release catalog in Baton's store.

This is data, not agent code: `baton.catalog.store_seed` writes these
manifests into the store, and what runs read at run time is the store's
catalog (`baton.catalog.changes.current_releases`). The scripted models
(`baton.agents.scripted_models`) implement exactly these manifests.

Two releases of one model family: `model-v7` and `model-v8`. They share every
component except the model itself, so moving a run from one to the other is a
behavioral migration caused by the model alone (sec. 15).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from baton.models import BehavioralRelease

_SHARED = {
    "prompt_bundle": "reference-prompts-3",
    "router_policy": "single-route-1",
    "tool_contract": "corpus-deploy-tools-2",
    "memory_schema": "memory-2",
    "verifier_bundle": "citations-1+deploy-check-1",
}

RELEASES: Mapping[str, BehavioralRelease] = MappingProxyType(
    {
        "model-v7": BehavioralRelease(model="scripted-model-v7", **_SHARED),
        "model-v8": BehavioralRelease(model="scripted-model-v8", **_SHARED),
    }
)
"""Release name -> manifest. The release id is the manifest's hash."""

OLDER_RELEASE = "model-v7"
BETTER_RELEASE = "model-v8"


def release_named(name: str) -> BehavioralRelease:
    """The release registered under `name`; KeyError names the known ones."""
    try:
        return RELEASES[name]
    except KeyError:
        raise KeyError(f"unknown release {name!r}; known: {sorted(RELEASES)}") from None


def release_name_of(release_id: str) -> str | None:
    """The catalog name of a release id, or None when it is not in the catalog."""
    for name, release in RELEASES.items():
        if release.release_id == release_id:
            return name
    return None
