"""Dagster asset events for the versions Baton's read model reports (`baton.lineage.AssetVersion`).

External assets (``observations``, ``candidates``, written by workers) are reported as
observations: Dagster's staleness compares only observations for an external upstream.
``verifier_evidence`` and ``checkpoints`` produced inside a worker are reported as
runless materializations. Either way the data version is the content hash, carried by
the ``dagster/data_version`` tag.
"""

from __future__ import annotations

from collections.abc import Mapping

from dagster import AssetKey, AssetMaterialization, AssetObservation, MetadataValue
from pydantic import JsonValue

from baton.lineage import CANDIDATES, OBSERVATIONS, AssetVersion

DATA_VERSION_TAG = "dagster/data_version"
EXTERNAL_ASSETS: frozenset[str] = frozenset({OBSERVATIONS, CANDIDATES})


def dagster_metadata(metadata: Mapping[str, JsonValue]) -> dict[str, MetadataValue]:
    """Baton metadata as Dagster metadata values (scalars as themselves, the rest as JSON)."""
    out: dict[str, MetadataValue] = {}
    for key, value in metadata.items():
        if value is None:
            out[key] = MetadataValue.null()
        elif isinstance(value, bool):
            out[key] = MetadataValue.bool(value)
        elif isinstance(value, int):
            out[key] = MetadataValue.int(value)
        elif isinstance(value, float):
            out[key] = MetadataValue.float(value)
        elif isinstance(value, str):
            out[key] = MetadataValue.text(value)
        else:
            out[key] = MetadataValue.json(value)  # type: ignore[arg-type]
    return out


def version_metadata(version: AssetVersion) -> dict[str, MetadataValue]:
    """The metadata shown on a version: Baton's, plus its seq, data and parent version."""
    return dagster_metadata({
        **version.metadata,
        "data_version": version.data_version,
        "parent_version": version.parent_version,
        "baton_seq": version.seq,
    })


def asset_event_for(version: AssetVersion) -> AssetObservation | AssetMaterialization:
    """The event reporting one version of a per-run asset, partitioned by its run id."""
    tags = {DATA_VERSION_TAG: version.data_version}
    key = AssetKey(version.asset)
    if version.asset in EXTERNAL_ASSETS:
        return AssetObservation(asset_key=key, partition=version.run_id, tags=tags,
                                metadata=version_metadata(version))
    return AssetMaterialization(asset_key=key, partition=version.run_id, tags=tags,
                                metadata=version_metadata(version))
