"""Runless asset events written in batches: a few transactions per tick instead of two per event.

Dagster 1.13 has no public bulk call for runless asset events (dagster#18149):
`instance.report_runless_asset_event` writes one event per call, and the
daemon writes a sensor's returned `asset_events` that way, one by one. What
the event log storage does offer is `store_event_batch`:

- dagster-postgres inserts a batch of materializations, or of observations, in
  one INSERT, then updates the asset's row from the batch's *last* event only.
  A batch must therefore hold one asset key: `write_asset_events` groups by
  (event type, asset key) so every asset's row ends at its own newest event.
- the SQLite storage has no batch path (the base class stores event by event,
  each opening two connections and committing two transactions).
  `write_asset_events` writes a group there with the storage's own statements
  (`prepare_insert_event`, `_store_asset_event_tags`, `_store_asset_event`), in
  one transaction on the run shard and one on the index shard: the rows are the
  ones `store_event` writes, in the same order.

Any other storage gets `store_event_batch` too (its own implementation, or the
base class's one-by-one loop). Groups keep the order of their first event, so
an upstream asset's events are stored before the downstream ones that point at
them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dagster import AssetMaterialization, AssetObservation, DagsterInstance
from dagster._core.events import AssetObservationData, DagsterEvent, DagsterEventType, StepMaterializationData
from dagster._core.events.log import EventLogEntry
from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from baton import clock

BATCH_LIMIT = 1000
"""Events per statement at most (PostgreSQL's bind-parameter limit is 65,535; a row binds 7)."""


def runless_entry(event: AssetMaterialization | AssetObservation) -> EventLogEntry:
    """The event log entry `instance.report_runless_asset_event(event)` stores."""
    if isinstance(event, AssetMaterialization):
        kind, payload = DagsterEventType.ASSET_MATERIALIZATION, StepMaterializationData(event)
    else:
        kind, payload = DagsterEventType.ASSET_OBSERVATION, AssetObservationData(event)
    dagster_event = DagsterEvent(event_type_value=kind.value, event_specific_data=payload, job_name=RUNLESS_JOB_NAME)
    return EventLogEntry(user_message="", level=logging.INFO, job_name=RUNLESS_JOB_NAME, run_id=RUNLESS_RUN_ID,
                         error_info=None, timestamp=clock.now().timestamp(), step_key=None,
                         dagster_event=dagster_event)


def _groups(events: Sequence[AssetMaterialization | AssetObservation]) -> list[list[EventLogEntry]]:
    """Entries grouped by (event type, asset key), each group in the order of its first event, chunked."""
    grouped: dict[tuple[type, str], list[EventLogEntry]] = {}
    for event in events:
        if not isinstance(event, (AssetMaterialization, AssetObservation)):
            raise TypeError(f"only materializations and observations are batched, got {type(event).__name__}")
        grouped.setdefault((type(event), event.asset_key.to_string()), []).append(runless_entry(event))
    return [entries[i:i + BATCH_LIMIT] for entries in grouped.values() for i in range(0, len(entries), BATCH_LIMIT)]


def _sqlite_batch(storage: SqliteEventLogStorage, entries: Sequence[EventLogEntry]) -> None:
    """What `store_event` does per event, for one group: each row serialized once, one transaction per shard."""
    rows = [storage._event_to_row(entry) for entry in entries]  # noqa: SLF001 - the storage's own row
    with storage.run_connection(RUNLESS_RUN_ID) as conn:
        conn.execute(SqlEventLogStorageTable.insert(), rows)
    with storage.index_transaction() as conn:
        inserted = conn.execute(
            SqlEventLogStorageTable.insert().returning(SqlEventLogStorageTable.c.id, sort_by_parameter_order=True), rows)
        ids = [int(row[0]) for row in inserted.fetchall()]
        storage._store_asset_event_tags(conn, entries, ids)  # noqa: SLF001 - the storage's own statement
        # One asset key per group: the asset's row ends at the newest event, as after event-by-event writes.
        storage._store_asset_event(conn, entries[-1], ids[-1])  # noqa: SLF001


def write_asset_events(instance: DagsterInstance, events: Sequence[AssetMaterialization | AssetObservation]) -> int:
    """Store runless materializations and observations in batches; returns the number of batches written."""
    storage = instance.event_log_storage
    batches = _groups(events)
    for entries in batches:
        if isinstance(storage, SqliteEventLogStorage):
            _sqlite_batch(storage, entries)
        else:
            storage.store_event_batch(entries)
    return len(batches)
