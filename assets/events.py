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


CODE_VERSION_TAG = "dagster/code_version"
INPUT_DATA_VERSION_PREFIX = "dagster/input_data_version/"
INPUT_EVENT_POINTER_PREFIX = "dagster/input_event_pointer/"
WORKER_CODE_VERSION = "baton-worker"


def asset_event_for(
    version: AssetVersion, input_pointers: Mapping[str, int] | None = None,
) -> AssetObservation | AssetMaterialization:
    """The event reporting one version of a per-run asset, partitioned by its run id.

    A materialization made inside a worker carries its provenance (the input
    data versions it was made from, and the storage ids of those inputs' events
    in `input_pointers`), as a Dagster-run materialization would: without it
    Dagster cannot tell that a newer candidate made that evidence STALE.
    """
    tags = {DATA_VERSION_TAG: version.data_version}
    if version.asset not in EXTERNAL_ASSETS and input_pointers:
        tags[CODE_VERSION_TAG] = WORKER_CODE_VERSION
        for dep, pointer in input_pointers.items():
            tags[INPUT_DATA_VERSION_PREFIX + dep] = version.input_versions[dep]
            tags[INPUT_EVENT_POINTER_PREFIX + dep] = str(pointer)
    key = AssetKey(version.asset)
    if version.asset in EXTERNAL_ASSETS:
        return AssetObservation(asset_key=key, partition=version.run_id, tags=tags,
                                metadata=version_metadata(version))
    return AssetMaterialization(asset_key=key, partition=version.run_id, tags=tags,
                                metadata=version_metadata(version))
