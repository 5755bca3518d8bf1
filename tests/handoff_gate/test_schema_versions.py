"""Checkpoint schema versions: directional reading and lineage-preserving migration."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from baton.checkpoints import put_record, restore
from baton.errors import CheckpointIntegrityError, SchemaMigrationError, SchemaVersionError
from baton.identity import canonical_json
from baton.models import ExecutionCheckpoint, PortabilityConstraints, PortableRunState, RunKind
from baton.schema_versions import (
    MIGRATED_FROM_V1_REASON,
    ExecutionCheckpointV1,
    migrate_chain,
    migrate_v1_to_v2,
    read_checkpoint,
    readable_versions,
    transform_target,
    upgrade,
)
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.factory import open_store

from builders.checkpoints import as_v1, chain, seal, v1_chain
from builders.records import parts


@pytest.fixture
def store(tmp_path: Path) -> SqlStore:
    opened = open_store("sqlite:///" + str(tmp_path / "baton.db"))
    yield opened  # type: ignore[misc]
    opened.close()


def test_readers_read_their_own_and_older_versions() -> None:
    assert readable_versions("1") == ("1",)
    assert readable_versions("2") == ("1", "2")
    with pytest.raises(SchemaVersionError, match="'7' is unknown"):
        readable_versions("7")


def test_new_reader_reads_both_versions(blobs: BlobStore) -> None:
    current = chain(blobs, 1)[0]
    legacy = as_v1(current)
    assert read_checkpoint(current.canonical()) == current
    assert read_checkpoint(legacy.canonical()) == legacy
    assert isinstance(read_checkpoint(legacy.canonical(), "2"), ExecutionCheckpointV1)


def test_old_reader_refuses_the_new_version_naming_both(blobs: BlobStore) -> None:
    current = chain(blobs, 1)[0]
    with pytest.raises(SchemaVersionError) as caught:
        read_checkpoint(current.canonical(), reader_version="1")
    message = str(caught.value)
    assert "version 3" in message and "version 1" in message and "newer" in message
    assert read_checkpoint(as_v1(current).canonical(), reader_version="1").schema_version == "1"


@pytest.mark.parametrize("version", ["4", "0", "", 2, None])
def test_unknown_versions_are_refused(blobs: BlobStore, version: object) -> None:
    document = chain(blobs, 1)[0].model_dump(mode="json")
    document["schema_version"] = version
    with pytest.raises(SchemaVersionError, match="unknown to this reader"):
        read_checkpoint(canonical_json(document))


def test_missing_version_and_garbage_are_specific_errors(blobs: BlobStore) -> None:
    document = chain(blobs, 1)[0].model_dump(mode="json")
    del document["schema_version"]
    with pytest.raises(SchemaVersionError, match="no schema_version"):
        read_checkpoint(canonical_json(document))
    with pytest.raises(CheckpointIntegrityError, match="not valid JSON"):
        read_checkpoint(b"{not json")
    with pytest.raises(CheckpointIntegrityError, match="not an object"):
        read_checkpoint(b"[1, 2]")


def test_tampered_v1_checkpoint_fails_its_hash(blobs: BlobStore) -> None:
    document = json.loads(as_v1(chain(blobs, 1)[0]).canonical())
    document["owner_epoch"] = 99
    with pytest.raises(CheckpointIntegrityError, match="does not match"):
        read_checkpoint(canonical_json(document))


def test_v1_layout_differs_from_v2(blobs: BlobStore) -> None:
    fields = set(json.loads(as_v1(chain(blobs, 1)[0]).canonical()))
    assert "budget_ref" in fields and "budget_ledger_ref" not in fields
    assert not fields & {"run_kind", "constraints", "resumability_reasons", "migrated_from_hash"}


def test_transform_target_only_moves_forward() -> None:
    assert transform_target("1", ["2"]) == "2"
    assert transform_target("1", ["1", "2"]) == "2"
    assert transform_target("2", ["1"]) is None
    assert transform_target("9", ["2"]) is None
    assert transform_target("1", []) is None


def test_migration_links_to_the_original_and_keeps_every_ref(blobs: BlobStore) -> None:
    original = chain(blobs, 1)[0]
    legacy = as_v1(original)
    migrated = migrate_v1_to_v2(legacy, blobs)
    assert migrated.schema_version == "2"
    assert migrated.migrated_from_hash == legacy.checkpoint_hash
    assert migrated.checkpoint_hash != legacy.checkpoint_hash
    assert migrated.run_kind is RunKind.RESEARCH
    assert migrated.budget_ledger_ref == legacy.budget_ref
    assert migrated.constraints == PortabilityConstraints()
    assert migrated.resumability_reasons == (MIGRATED_FROM_V1_REASON,)
    same = {"task_state_ref", "observation_manifest_ref", "release_id", "placement_ref", "boundary", "owner_epoch", "seq"}
    assert {k: getattr(migrated, k) for k in same} == {k: getattr(legacy, k) for k in same}
    restored = restore(blobs, migrated)
    assert len(restored.observations) == 1


def test_migration_is_deterministic(blobs: BlobStore) -> None:
    legacy = v1_chain(blobs, 3)
    assert migrate_chain(legacy, blobs) == migrate_chain(list(reversed(legacy)), blobs)


def test_migrated_chain_links_to_itself_and_to_the_originals(blobs: BlobStore) -> None:
    legacy = v1_chain(blobs, 3)
    migrated = migrate_chain(legacy, blobs)
    assert [m.migrated_from_hash for m in migrated] == [old.checkpoint_hash for old in legacy]
    assert migrated[0].parent_checkpoint_hash is None
    for parent, child in zip(migrated, migrated[1:]):
        assert child.parent_checkpoint_hash == parent.checkpoint_hash


def test_original_record_is_untouched_and_the_new_one_is_stored(blobs: BlobStore, store: SqlStore) -> None:
    legacy = v1_chain(blobs, 2)
    originals = [blobs.put(old.canonical()) for old in legacy]  # where the v1 records live
    before = [blobs.get(ref) for ref in originals]
    migrated = migrate_chain(legacy, blobs)
    store.create_run("run-1", RunKind.RESEARCH, migrated[0].release_id, "eu-1")
    for checkpoint in migrated:
        store.append_checkpoint(checkpoint)
    assert [blobs.get(ref) for ref in originals] == before
    assert [read_checkpoint(data) for data in before] == legacy
    assert store.list_checkpoints("run-1") == list(migrated)
    assert store.get_checkpoint("run-1/000001").migrated_from_hash == legacy[1].checkpoint_hash


def test_child_needs_its_migrated_parent(blobs: BlobStore) -> None:
    legacy = v1_chain(blobs, 2)
    with pytest.raises(SchemaMigrationError, match="migrated form of its parent"):
        migrate_v1_to_v2(legacy[1], blobs)
    unrelated = migrate_v1_to_v2(as_v1(seal(blobs, parts(step=7))), blobs)
    with pytest.raises(SchemaMigrationError, match="migrated form of its parent"):
        migrate_v1_to_v2(legacy[1], blobs, parent=unrelated)
    with pytest.raises(SchemaMigrationError, match="has no parent"):
        migrate_v1_to_v2(legacy[0], blobs, parent=unrelated)


def test_v1_without_a_recorded_run_kind_cannot_be_migrated(blobs: BlobStore) -> None:
    run_parts = parts()
    run_parts = dataclasses.replace(run_parts, state=PortableRunState(task="no kind recorded"))
    legacy = as_v1(seal(blobs, run_parts))
    with pytest.raises(SchemaMigrationError, match="run kind"):
        migrate_v1_to_v2(legacy, blobs)


def test_upgrade_passes_current_checkpoints_through(blobs: BlobStore) -> None:
    current = chain(blobs, 1)[0]
    assert upgrade(current, blobs) is current
    assert upgrade(as_v1(current), blobs).migrated_from_hash == as_v1(current).checkpoint_hash
    assert put_record(blobs, current)  # a v2 checkpoint is itself a storable record
    assert isinstance(upgrade(as_v1(current), blobs), ExecutionCheckpoint)
