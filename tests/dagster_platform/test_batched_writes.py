"""Batched runless writes (`assets.writes`) leave what Dagster's own one-by-one writes leave.

The oracle is a second Dagster instance fed the same events through the public
`instance.report_runless_asset_event`, read back through Dagster's own queries
(latest event per asset, per-partition storage ids and data versions, the
materialized partitions, the events' tags and metadata). On PostgreSQL a
single `store_event_batch` mixing two assets updates only the last event's
asset row; the same comparison catches that (so it can fail), and the writer,
which batches per asset, passes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from dagster import AssetKey, AssetMaterialization, AssetObservation, DagsterInstance, instance_for_test
from dagster._core.events import DagsterEventType

from assets.events import DATA_VERSION_TAG
from assets.writes import BATCH_LIMIT, runless_entry, write_asset_events

from .test_dagster_postgres import documented_postgres_config

RUNS = ("run-a", "run-b", "run-c")


def _events() -> list[AssetMaterialization | AssetObservation]:
    """Observations and materializations of three assets over three partitions, two versions of one."""
    events: list[AssetMaterialization | AssetObservation] = []
    for i, run in enumerate(RUNS):
        events.append(AssetObservation(asset_key=AssetKey("candidates"), partition=run,
                                       tags={DATA_VERSION_TAG: f"cand-{run}"}, metadata={"n": i}))
    for version in (1, 2):
        for run in RUNS:
            events.append(AssetMaterialization(asset_key=AssetKey("verifier_evidence"), partition=run,
                                               tags={DATA_VERSION_TAG: f"ev-{run}-{version}"}, metadata={"v": version}))
    for run in RUNS[:2]:
        events.append(AssetMaterialization(asset_key=AssetKey("checkpoints"), partition=run,
                                           tags={DATA_VERSION_TAG: f"ck-{run}"}))
    return events


def _state(instance: DagsterInstance) -> dict[str, object]:
    """What Dagster reports about each asset, without storage ids (they differ between instances)."""
    state: dict[str, object] = {}
    for name, kind in (("candidates", DagsterEventType.ASSET_OBSERVATION),
                       ("verifier_evidence", DagsterEventType.ASSET_MATERIALIZATION),
                       ("checkpoints", DagsterEventType.ASSET_MATERIALIZATION)):
        key = AssetKey(name)
        latest = instance.get_latest_storage_id_by_partition(key, kind)
        tags = instance.event_log_storage.get_latest_tags_by_partition(key, kind, [DATA_VERSION_TAG])
        fetch = instance.fetch_observations if kind is DagsterEventType.ASSET_OBSERVATION else instance.fetch_materializations
        records = fetch(key, limit=100).records
        events = [r.asset_observation or r.asset_materialization for r in records]
        rows = instance.get_asset_records([key])  # the asset's own row, which a batch updates once
        newest = rows[0].asset_entry.last_materialization_record if rows else None
        state[name] = {
            "partitions": sorted(latest), "data_versions": tags,
            "events": [(e.partition, dict(e.tags or {}), sorted(e.metadata)) for e in events if e is not None],
            "materialized": sorted(instance.get_materialized_partitions(key)),
            "asset_row": bool(rows),
            "asset_row_last_materialization": None if newest is None or newest.asset_materialization is None else (
                newest.asset_materialization.partition, dict(newest.asset_materialization.tags or {})),
        }
    return state


def _oracle_state() -> dict[str, object]:
    with instance_for_test() as reference:
        for event in _events():
            reference.report_runless_asset_event(event)
        return _state(reference)


@contextmanager
def _postgres_instance(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[DagsterInstance]:
    (tmp_path / "dagster.yaml").write_text(documented_postgres_config())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSTER_PG_URL", re.sub(r"^postgres(ql)?://", "postgresql+psycopg2://", url))
    with DagsterInstance.get() as instance:
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        yield instance


def test_sqlite_batches_match_one_by_one_writes() -> None:
    with instance_for_test() as instance:
        assert type(instance.event_log_storage).__name__ == "SqliteEventLogStorage"
        assert write_asset_events(instance, _events()) == 3  # one batch per asset and event type
        assert _state(instance) == _oracle_state()


def test_postgres_batches_match_one_by_one_writes(tmp_path: Path, postgres_url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with _postgres_instance(tmp_path, postgres_url, monkeypatch) as instance:
        assert write_asset_events(instance, _events()) == 3
        assert _state(instance) == _oracle_state()


def test_postgres_one_batch_across_assets_breaks_the_comparison(tmp_path: Path, postgres_url: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the writer groups per asset: the comparison above notices a mixed batch."""
    with _postgres_instance(tmp_path, postgres_url, monkeypatch) as instance:
        events = _events()
        instance.report_runless_asset_event(events[0])  # the observation, so every asset row exists
        instance.event_log_storage.store_event_batch([runless_entry(e) for e in events[1:]
                                                      if isinstance(e, AssetMaterialization)])
        state, oracle = _state(instance), _oracle_state()
        assert state["verifier_evidence"] != oracle["verifier_evidence"]  # type: ignore[index]


def test_groups_keep_upstream_first_and_chunk_large_batches() -> None:
    events: list[AssetMaterialization | AssetObservation] = [
        AssetObservation(asset_key=AssetKey("candidates"), partition=f"r{i}", tags={DATA_VERSION_TAG: str(i)})
        for i in range(BATCH_LIMIT + 5)]
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("runs", [f"r{i}" for i in range(BATCH_LIMIT + 5)])
        assert write_asset_events(instance, events) == 2
        latest = instance.get_latest_storage_id_by_partition(AssetKey("candidates"), DagsterEventType.ASSET_OBSERVATION)
        assert len(latest) == BATCH_LIMIT + 5
        assert latest["r0"] < latest[f"r{BATCH_LIMIT + 4}"]  # stored in the order given
    with pytest.raises(TypeError):
        write_asset_events(instance, ["not an event"])  # type: ignore[list-item]
