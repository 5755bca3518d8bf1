"""Checkpoint schema versions, directional compatibility and deterministic migration.

Version 1 is the older layout: no run kind field (v1 writers kept it in the
task state's memory under `run_kind`), no portability constraints, no
resumability reasons, no migration lineage, and the budget ledger ref was
called `budget_ref`. Version 2 is the layout of `baton.models.ExecutionCheckpoint`
sealed over pydantic's JSON (`baton.identity_legacy`); version 3 is the same
layout plus `migration_ref`, with every record and the seal in Baton's own
canonical form (`baton.identity`, docs/canonical-form.md). Version 2 to 3
rewrites the records themselves (`baton.hash_migration`).

A reader of version N reads every known version up to N and refuses newer or
unknown ones. Migration never edits a record: it seals a new checkpoint whose
`migrated_from_hash` names the original.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from baton.checkpoints import get_record
from baton.errors import CheckpointIntegrityError, SchemaMigrationError, SchemaVersionError
from baton.models import (
    CHECKPOINT_SCHEMA_VERSION,
    Boundary,
    ExecutionCheckpoint,
    PortabilityConstraints,
    PortableRunState,
    Record,
    Ref,
    ResumabilityClass,
    RunKind,
    checkpoint_id_for,
)
from baton.store.blobs import BlobStore

SCHEMA_V1 = "1"
SCHEMA_V2 = "2"
SCHEMA_V3 = "3"
CURRENT_SCHEMA_VERSION = CHECKPOINT_SCHEMA_VERSION
KNOWN_SCHEMA_VERSIONS: tuple[str, ...] = (SCHEMA_V1, SCHEMA_V2, SCHEMA_V3)
"""Oldest first; each version can be migrated to the next."""

V1_RUN_KIND_KEY = "run_kind"
"""Where v1 writers kept the run kind: a key of the task state's memory."""

MIGRATED_FROM_V1_REASON = "migrated_from_schema_v1"


class ExecutionCheckpointV1(Record):
    """The version 1 checkpoint layout, sealed the same way as version 2."""

    schema_version: Literal["1"] = SCHEMA_V1
    run_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    checkpoint_id: str
    seq: int = Field(ge=0)
    parent_checkpoint_id: str | None = None
    parent_checkpoint_hash: Ref | None = None
    release_id: Ref
    environment_id: Ref
    placement_ref: Ref
    task_state_ref: Ref
    observation_manifest_ref: Ref
    candidate_manifest_ref: Ref
    verifier_evidence_ref: Ref
    workspace_snapshot_ref: Ref | None = None
    memory_snapshot_ref: Ref | None = None
    search_state_ref: Ref | None = None
    operation_ledger_ref: Ref
    authority_context_ref: Ref
    budget_ref: Ref
    owner_epoch: int = Field(ge=0)
    boundary: Boundary
    resumability: ResumabilityClass
    sealed_at: dt.datetime
    checkpoint_hash: Ref

    @classmethod
    def seal(cls, **fields: Any) -> ExecutionCheckpointV1:
        """Build a v1 checkpoint and seal it with its hash."""
        unsealed = cls.model_construct(**fields, checkpoint_hash="sha256:" + "0" * 64)
        return cls(**fields, checkpoint_hash=ExecutionCheckpoint.compute_hash(unsealed.model_dump(mode="json")))

    @model_validator(mode="after")
    def _hash_matches(self) -> ExecutionCheckpointV1:
        expected = ExecutionCheckpoint.compute_hash(self.model_dump(mode="json"))
        if expected != self.checkpoint_hash:
            raise CheckpointIntegrityError(
                f"v1 checkpoint {self.checkpoint_id}: recorded hash {self.checkpoint_hash} "
                f"does not match content hash {expected} (corrupt or tampered)"
            )
        if self.checkpoint_id != checkpoint_id_for(self.run_id, self.seq):
            raise ValueError(f"checkpoint_id {self.checkpoint_id!r} does not match run {self.run_id!r} seq {self.seq}")
        if (self.parent_checkpoint_id is None) != (self.parent_checkpoint_hash is None):
            raise ValueError("parent_checkpoint_id and parent_checkpoint_hash go together")
        return self


AnyCheckpoint = ExecutionCheckpoint | ExecutionCheckpointV1
"""A checkpoint of any known schema version."""

_MODELS: dict[str, type[ExecutionCheckpoint] | type[ExecutionCheckpointV1]] = {
    SCHEMA_V1: ExecutionCheckpointV1,
    SCHEMA_V2: ExecutionCheckpoint,
    SCHEMA_V3: ExecutionCheckpoint,
}


def _order(version: str) -> int:
    return KNOWN_SCHEMA_VERSIONS.index(version)


def _require_known_reader(reader_version: str) -> None:
    if reader_version not in KNOWN_SCHEMA_VERSIONS:
        raise SchemaVersionError(
            f"reader schema version {reader_version!r} is unknown; known versions: {', '.join(KNOWN_SCHEMA_VERSIONS)}"
        )


def readable_versions(reader_version: str = CURRENT_SCHEMA_VERSION) -> tuple[str, ...]:
    """The schema versions a reader of `reader_version` can read: itself and every older one."""
    _require_known_reader(reader_version)
    return KNOWN_SCHEMA_VERSIONS[: _order(reader_version) + 1]


def check_readable(version: object, reader_version: str = CURRENT_SCHEMA_VERSION) -> str:
    """Return `version` if a reader of `reader_version` reads it; raise SchemaVersionError naming both."""
    readable = readable_versions(reader_version)
    if not isinstance(version, str) or version not in KNOWN_SCHEMA_VERSIONS:
        raise SchemaVersionError(
            f"checkpoint schema version {version!r} is unknown to this reader (version {reader_version}), "
            f"which reads versions {', '.join(readable)}"
        )
    if version not in readable:
        raise SchemaVersionError(
            f"checkpoint schema version {version} is newer than this reader (version {reader_version}); "
            f"a version {reader_version} reader cannot read version {version} checkpoints"
        )
    return version


def read_checkpoint(data: bytes, reader_version: str = CURRENT_SCHEMA_VERSION) -> AnyCheckpoint:
    """Parse checkpoint JSON as the reader of `reader_version` would.

    Raises SchemaVersionError for a missing, unknown or too-new version, and
    CheckpointIntegrityError for malformed JSON or a hash that does not match.
    """
    _require_known_reader(reader_version)
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointIntegrityError(f"checkpoint is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise CheckpointIntegrityError("checkpoint JSON is not an object")
    if "schema_version" not in document:
        raise SchemaVersionError(f"checkpoint has no schema_version (reader version {reader_version})")
    version = check_readable(document["schema_version"], reader_version)
    return _MODELS[version].model_validate(document)


def transform_target(version: str, readable: Iterable[str]) -> str | None:
    """The newest version in `readable` that `version` can be migrated forward to, if any.

    Returns None when no forward migration reaches a readable version (an
    unknown version, or a reader that only reads older versions).
    """
    if version not in KNOWN_SCHEMA_VERSIONS:
        return None
    reachable = [v for v in readable if v in KNOWN_SCHEMA_VERSIONS and _order(v) > _order(version)]
    return max(reachable, key=_order) if reachable else None


def _v1_run_kind(old: ExecutionCheckpointV1, blobs: BlobStore) -> RunKind:
    state = get_record(blobs, old.task_state_ref, PortableRunState, what="run state")
    value = state.memory.get(V1_RUN_KIND_KEY)
    try:
        return RunKind(value)
    except ValueError:
        raise SchemaMigrationError(
            f"v1 checkpoint {old.checkpoint_id}: task state memory has no valid {V1_RUN_KIND_KEY!r} "
            f"(found {value!r}); the run kind cannot be derived"
        ) from None


def migrate_v1_to_v2(
    old: ExecutionCheckpointV1,
    blobs: BlobStore,
    *,
    parent: ExecutionCheckpoint | None = None,
) -> ExecutionCheckpoint:
    """Seal a new v2 checkpoint equivalent to `old`, linked to it by `migrated_from_hash`.

    Deterministic: the same v1 checkpoint (and migrated parent) always gives
    the same v2 hash. `old` is never changed. A checkpoint with a parent needs
    that parent's migrated v2 form, so the migrated chain links to itself.
    The run kind is read from the task state blob; constraints become the v1
    meaning of none (portable anywhere).
    """
    if old.parent_checkpoint_hash is None:
        if parent is not None:
            raise SchemaMigrationError(f"v1 checkpoint {old.checkpoint_id} has no parent, but one was given")
    elif (
        parent is None
        or parent.migrated_from_hash != old.parent_checkpoint_hash
        or parent.checkpoint_id != old.parent_checkpoint_id
    ):
        raise SchemaMigrationError(
            f"v1 checkpoint {old.checkpoint_id}: pass the migrated form of its parent "
            f"{old.parent_checkpoint_id} (migrated_from_hash {old.parent_checkpoint_hash})"
        )
    return ExecutionCheckpoint.seal(
        schema_version=SCHEMA_V2,
        run_id=old.run_id,
        checkpoint_id=old.checkpoint_id,
        seq=old.seq,
        parent_checkpoint_id=old.parent_checkpoint_id,
        parent_checkpoint_hash=None if parent is None else parent.checkpoint_hash,
        migrated_from_hash=old.checkpoint_hash,
        run_kind=_v1_run_kind(old, blobs),
        release_id=old.release_id,
        environment_id=old.environment_id,
        placement_ref=old.placement_ref,
        task_state_ref=old.task_state_ref,
        observation_manifest_ref=old.observation_manifest_ref,
        candidate_manifest_ref=old.candidate_manifest_ref,
        verifier_evidence_ref=old.verifier_evidence_ref,
        workspace_snapshot_ref=old.workspace_snapshot_ref,
        memory_snapshot_ref=old.memory_snapshot_ref,
        search_state_ref=old.search_state_ref,
        operation_ledger_ref=old.operation_ledger_ref,
        authority_context_ref=old.authority_context_ref,
        budget_ledger_ref=old.budget_ref,
        constraints=PortabilityConstraints(),
        owner_epoch=old.owner_epoch,
        boundary=old.boundary,
        resumability=old.resumability,
        resumability_reasons=(MIGRATED_FROM_V1_REASON,),
        sealed_at=old.sealed_at,
    )


def migrate_chain(chain: Sequence[ExecutionCheckpointV1], blobs: BlobStore) -> tuple[ExecutionCheckpoint, ...]:
    """Migrate a run's v1 checkpoints (any order, from seq 0, no gaps) into a linked v2 chain."""
    ordered = sorted(chain, key=lambda checkpoint: checkpoint.seq)
    migrated: list[ExecutionCheckpoint] = []
    for old in ordered:
        migrated.append(migrate_v1_to_v2(old, blobs, parent=migrated[-1] if migrated else None))
    return tuple(migrated)


def upgrade(
    checkpoint: AnyCheckpoint,
    blobs: BlobStore,
    *,
    parent: ExecutionCheckpoint | None = None,
) -> ExecutionCheckpoint:
    """The current-version form of `checkpoint` (itself when already current)."""
    if isinstance(checkpoint, ExecutionCheckpoint):
        return checkpoint
    return migrate_v1_to_v2(checkpoint, blobs, parent=parent)
