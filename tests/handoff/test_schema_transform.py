"""A LOGICAL move commits the run's state at the schema the gate chose (`baton.handoff.transform`), on every backend.

The run is one an older Baton sealed at checkpoint schema 2 (its parts re-encoded by the older site's writer,
`baton.faults.cases_schema.legacy_form`), held on local-gpu-eu, which reads schemas 1 to 3. Moved to cloud-eu, which
reads only schema 3, the commit seals a NEW checkpoint (seq + 1, parent the original, naming it) and the new owner
restores that one; the original row and parts stay as they were. A move to a placement that reads schema 2 is
PHYSICAL and seals nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.checkpoints import restore
from baton.compat import MigrationClass
from baton.faults.cases_schema import legacy_form
from baton.faults.oracles import checkpoint_seal
from baton.errors import SchemaMigrationError
from baton.handoff import HandoffCoordinator, HandoffRequest, PreparedHandoff, prepare_resume
from baton.handoff.transform import transformed_state
from baton.hash_migration import lineage_of
from baton.models import AuthorityLevel, Event, EventType, ExecutionCheckpoint, Placement, RunKind
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.launch import RunSpec, default_limits, launch_run
from baton.runtime.restore_record import RESTORE_RECORD_ENV, record_restore
from baton.catalog.releases import RELEASES
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.sqlite import SqliteStore

SOURCE = placement_named(DEFAULT_PLACEMENTS, "local-gpu-eu")
TARGET = placement_named(DEFAULT_PLACEMENTS, "cloud-eu")
"""Reads only checkpoint schema 3."""
READS_2 = TARGET.model_copy(update={"name": "cloud-eu-old", "readable_schema_versions": ("2", "3")})


def _legacy_run(store: SqlStore, blobs: BlobStore, tmp_path: Path) -> ExecutionCheckpoint:
    """A deploy run whose only checkpoint an older Baton sealed at schema 2, held on local-gpu-eu at epoch 1."""
    run_id = f"legacy-{tmp_path.name[-8:]}".replace("_", "-")
    scratch = SqliteStore(tmp_path / "older-launch.db")
    try:
        spec = RunSpec(run_id, RunKind.DEPLOY, RELEASES["model-v7"], SOURCE, "deploy checkout",
                       {"service": "checkout"}, AuthorityLevel.EXTERNAL_MUTATE, limits=default_limits(scratch.db_now()))
        first, _ = launch_run(scratch, blobs, spec, reservation_ttl_s=10.0)
    finally:
        scratch.close()
    legacy = legacy_form(first, blobs)
    store.create_run(run_id, spec.kind, legacy.release_id, SOURCE.name, {})
    store.append_checkpoint(legacy)
    assert store.acquire_lease(run_id, "worker-a", 30, expected_epoch=0) is not None
    assert legacy.schema_version == "2"
    return legacy


def _coordinator(store: SqlStore, blobs: BlobStore, target: Placement) -> HandoffCoordinator:
    return HandoffCoordinator(store, blobs, {SOURCE.name: SOURCE, target.name: target}, quiesce_timeout_s=0.2)


def _prepared(coordinator: HandoffCoordinator, original: ExecutionCheckpoint) -> PreparedHandoff:
    prepared = coordinator.prepare(HandoffRequest(original.run_id, "rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff), prepared
    return prepared


def _raw_row(store: SqlStore, checkpoint_id: str) -> tuple:
    return tuple(store.execute_raw("SELECT checkpoint_hash, schema_version, body, packed FROM checkpoints WHERE checkpoint_id = ?",
                                   (checkpoint_id,))[0])


def test_a_logical_move_commits_the_migrated_state_and_the_new_owner_restores_it(
        store: SqlStore, blobs: BlobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = _legacy_run(store, blobs, tmp_path)
    row_before = _raw_row(store, original.checkpoint_id)
    outcome = _coordinator(store, blobs, TARGET).handoff(HandoffRequest(original.run_id, "rebalance",
                                                                        source_alive=False))
    assert outcome.committed and outcome.target_placement == TARGET.name, outcome.abort_reason
    assert outcome.decision is not None and outcome.decision.migration_class is MigrationClass.LOGICAL
    assert outcome.decision.target_schema_version == "3"

    kept, migrated = store.list_checkpoints(original.run_id)
    assert kept == original and _raw_row(store, original.checkpoint_id) == row_before  # never mutated
    assert (migrated.seq, migrated.schema_version, migrated.owner_epoch) == (1, "3", outcome.target_epoch)
    assert (migrated.parent_checkpoint_id, migrated.parent_checkpoint_hash) == (original.checkpoint_id,
                                                                                original.checkpoint_hash)
    assert migrated.migrated_from_hash == original.checkpoint_hash
    lineage = lineage_of(migrated, blobs)
    assert (lineage.original_checkpoint_hash, lineage.from_schema_version, lineage.to_schema_version) == (
        original.checkpoint_hash, "2", "3")
    restore(blobs, migrated, verify_artifact=True)  # every part verifies under the canonical hashing
    assert (migrated.boundary, migrated.release_id) == (original.boundary, original.release_id)

    ((_, recorded),) = store.list_events(run_id=original.run_id, event_types=[EventType.SCHEMA_MIGRATED])
    assert (recorded.checkpoint_id, recorded.state_schema, recorded.target_epoch) == (
        migrated.checkpoint_id, "3", outcome.target_epoch)
    assert recorded.detail["migrated_from_hash"] == original.checkpoint_hash
    assert recorded.detail["checkpoint_hash"] == migrated.checkpoint_hash

    adopted = store.acquire_lease(original.run_id, "worker-b", 30, expected_epoch=outcome.target_epoch or 0,
                                  require_expired=False)
    assert adopted is not None
    plan = prepare_resume(store, blobs, original.run_id, placement=TARGET, epoch=adopted.epoch)
    assert plan.checkpoint == migrated and plan.checkpoint.schema_version in TARGET.readable_schema_versions

    # The worker's record of what it restored, as the fault matrix's oracle reads it (stdlib seal, lineage).
    record = tmp_path / "restored.jsonl"
    monkeypatch.delenv(RESTORE_RECORD_ENV, raising=False)
    record_restore(plan)  # no variable: nothing written
    assert not record.exists()
    monkeypatch.setenv(RESTORE_RECORD_ENV, str(record))
    record_restore(plan)
    (line,) = [json.loads(text) for text in record.read_text().splitlines()]
    assert (line["run_id"], line["placement"], line["epoch"]) == (original.run_id, TARGET.name, adopted.epoch)
    assert checkpoint_seal(line["checkpoint"]) == migrated.checkpoint_hash
    assert line["checkpoint"]["migrated_from_hash"] == original.checkpoint_hash


def test_a_physical_move_transforms_nothing(store: SqlStore, blobs: BlobStore, tmp_path: Path) -> None:
    original = _legacy_run(store, blobs, tmp_path)
    outcome = _coordinator(store, blobs, READS_2).handoff(HandoffRequest(original.run_id, "rebalance",
                                                                         source_alive=False))
    assert outcome.committed and outcome.decision is not None, outcome.abort_reason
    assert outcome.decision.migration_class is MigrationClass.PHYSICAL
    assert store.list_checkpoints(original.run_id) == [original]
    assert store.list_events(run_id=original.run_id, event_types=[EventType.SCHEMA_MIGRATED]) == []


def test_the_transform_lands_only_with_the_commit_and_once(store: SqlStore, blobs: BlobStore, tmp_path: Path) -> None:
    """Deterministic, refused with a refused commit, and not made twice by a retried commit."""
    original = _legacy_run(store, blobs, tmp_path)
    coordinator = _coordinator(store, blobs, TARGET)
    prepared = _prepared(coordinator, original)
    first = transformed_state(original, prepared.decision, blobs, owner_epoch=2)
    assert first is not None
    assert transformed_state(original, prepared.decision, blobs, owner_epoch=2) == first  # same input, same seal

    # A commit the store refuses (the request was already answered, as `baton recover` would) seals nothing.
    aborted = Event(event_type=EventType.HANDOFF_ABORTED, run_id=original.run_id, at=store.db_now(),
                    reason="recovered", detail={"request_seq": prepared.request_seq})
    assert store.abort_open_handoff(original.run_id, prepared.request_seq, [aborted]) is not None
    refused = coordinator.commit(prepared)
    assert not refused.committed and store.list_checkpoints(original.run_id) == [original]

    # A fresh move commits it once; committing the same prepared move again adds nothing.
    prepared = _prepared(coordinator, original)
    assert coordinator.commit(prepared).committed
    assert not coordinator.commit(prepared).committed
    kept, migrated = store.list_checkpoints(original.run_id)
    assert kept == original and migrated.checkpoint_hash == first.checkpoint_hash
    assert len(store.list_events(run_id=original.run_id, event_types=[EventType.SCHEMA_MIGRATED])) == 1


def test_a_decision_for_a_schema_this_baton_cannot_write_is_refused(
        store: SqlStore, blobs: BlobStore, tmp_path: Path) -> None:
    original = _legacy_run(store, blobs, tmp_path)
    prepared = _prepared(_coordinator(store, blobs, TARGET), original)
    decision = prepared.decision.model_copy(update={"target_schema_version": "4"})
    with pytest.raises(SchemaMigrationError, match="migrates to schema 3 only"):
        transformed_state(original, decision, blobs, owner_epoch=2)
