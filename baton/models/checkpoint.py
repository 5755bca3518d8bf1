"""The execution checkpoint: a hash-sealed manifest of durable refs at a semantic boundary."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from pydantic import Field, ValidationInfo, model_validator

from baton.errors import CheckpointIntegrityError
from baton.identity import plain_value, ref_of
from baton.identity_legacy import legacy_ref_of
from baton.models.base import Record, Ref
from baton.models.constraints import PortabilityConstraints

CHECKPOINT_SCHEMA_VERSION = "3"
"""The schema version this code writes: sealed with Baton's canonical form (docs/canonical-form.md)."""

LEGACY_HASH_VERSIONS = frozenset({"1", "2"})
"""Schema versions sealed over pydantic's JSON output (`baton.identity_legacy`); they verify, never get written."""


class Boundary(StrEnum):
    """Semantic boundaries of a run's lifecycle; checkpoints are sealed only here."""

    GENERATING = "GENERATING"
    CANDIDATE_READY = "CANDIDATE_READY"
    VERIFYING = "VERIFYING"
    VERIFIED = "VERIFIED"
    AWAITING_AUTHORITY = "AWAITING_AUTHORITY"
    AUTHORIZED = "AUTHORIZED"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    POSTCONDITION_VERIFIED = "POSTCONDITION_VERIFIED"
    FAILED = "FAILED"
    ESCALATED = "ESCALATED"


class ResumabilityClass(StrEnum):
    """How a run may be resumed from a checkpoint."""

    R0 = "R0"  # not resumable
    R1 = "R1"  # restart from the previous durable boundary
    R2 = "R2"  # resume from deterministic state
    R3 = "R3"  # resume with recorded observations
    R4 = "R4"  # resume after ownership transfer
    R5 = "R5"  # resume after external side effects, with reconciliation
    MIGRATION_UNSAFE = "MIGRATION_UNSAFE"


class RunKind(StrEnum):
    PLANNING = "planning"
    RESEARCH = "research"
    CODING = "coding"
    BROWSER = "browser"
    DEPLOY = "deploy"


_CHECKPOINT_ID_PATTERN = r"^[A-Za-z0-9_.:-]+/[0-9]{6,}$"


_UNSEALED = "sha256:" + "0" * 64
_SEALING: dict[str, bool] = {"sealing": True}  # validation context of `seal` (compared by identity)
_SEALED_BODIES: dict[int, tuple[Any, dict[str, Any]]] = {}
"""id of a checkpoint `seal` returned -> (that checkpoint, its plain value); see `take_sealed_body`."""
_SEALED_BODIES_LIMIT = 64


def checkpoint_id_for(run_id: str, seq: int) -> str:
    """The id of the `seq`-th checkpoint of a run."""
    return f"{run_id}/{seq:06d}"


class ExecutionCheckpoint(Record):
    """Everything needed to rebuild a run's logical state elsewhere, by durable ref.

    `checkpoint_hash` covers every other field; the record refuses to exist
    with a hash that does not match, so a tampered checkpoint fails on load.
    """

    schema_version: str = CHECKPOINT_SCHEMA_VERSION
    run_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    checkpoint_id: str = Field(pattern=_CHECKPOINT_ID_PATTERN)
    seq: int = Field(ge=0)
    parent_checkpoint_id: str | None = None
    parent_checkpoint_hash: Ref | None = None
    migrated_from_hash: Ref | None = None
    migration_ref: Ref | None = None
    run_kind: RunKind
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
    budget_ledger_ref: Ref
    constraints: PortabilityConstraints = Field(default_factory=PortabilityConstraints)
    owner_epoch: int = Field(ge=0)
    boundary: Boundary
    resumability: ResumabilityClass
    resumability_reasons: tuple[str, ...] = ()
    sealed_at: dt.datetime
    checkpoint_hash: Ref

    @staticmethod
    def compute_hash(fields: dict[str, Any]) -> str:
        """Hash of every field except `checkpoint_hash` itself, by the rule of the fields' schema version.

        Versions 1 and 2 hash pydantic's JSON form of the fields (pass
        `model_dump(mode="json")`); later versions hash their plain values.
        """
        body = {key: value for key, value in fields.items() if key != "checkpoint_hash"}
        if body.get("schema_version") in LEGACY_HASH_VERSIONS:
            return legacy_ref_of(body)
        return ref_of(body)

    def content_hash(self) -> str:
        """The hash this checkpoint's content calls for (what `checkpoint_hash` must be)."""
        if self.schema_version in LEGACY_HASH_VERSIONS:
            fields = self.model_dump(mode="json", exclude={"migration_ref"})
        else:
            fields = plain_value(self)
        return self.compute_hash(fields)

    @classmethod
    def seal(cls, **fields: Any) -> ExecutionCheckpoint:
        """Build a checkpoint from its fields (validated) and seal it with its hash."""
        draft = cls.model_validate({**fields, "checkpoint_hash": _UNSEALED}, context=_SEALING)
        if draft.schema_version in LEGACY_HASH_VERSIONS:
            return draft.model_copy(update={"checkpoint_hash": draft.content_hash()})
        body = plain_value(draft)
        checkpoint_hash = cls.compute_hash(body)
        sealed = draft.model_copy(update={"checkpoint_hash": checkpoint_hash})
        body["checkpoint_hash"] = checkpoint_hash  # the sealed checkpoint's plain value: only this field differs
        if len(_SEALED_BODIES) >= _SEALED_BODIES_LIMIT:
            _SEALED_BODIES.clear()
        _SEALED_BODIES[id(sealed)] = (sealed, body)
        return sealed

    @staticmethod
    def take_sealed_body(checkpoint: ExecutionCheckpoint) -> dict[str, Any] | None:
        """The plain value `seal` hashed `checkpoint` from, once, if this very object came from `seal`.

        The store records a checkpoint from its plain value after checking the hash against it; for
        a checkpoint just sealed in this process that value and that check are `seal`'s own (the
        object is frozen, and the entry holds it, so its id cannot name another object). Any other
        checkpoint (built elsewhere, copied, parsed) gets None and is encoded and checked anew."""
        entry = _SEALED_BODIES.pop(id(checkpoint), None)
        if entry is None or entry[0] is not checkpoint:
            return None
        return entry[1]

    @model_validator(mode="after")
    def _hash_matches(self, info: ValidationInfo) -> ExecutionCheckpoint:
        sealing = info.context is _SEALING
        if self.schema_version in LEGACY_HASH_VERSIONS and self.migration_ref is not None:
            raise ValueError(f"a schema version {self.schema_version} checkpoint has no migration_ref")
        expected = None if sealing else self.content_hash()
        if expected is not None and expected != self.checkpoint_hash:
            raise CheckpointIntegrityError(
                f"checkpoint {self.checkpoint_id}: recorded hash {self.checkpoint_hash} "
                f"does not match content hash {expected} (corrupt or tampered)"
            )
        if self.checkpoint_id != checkpoint_id_for(self.run_id, self.seq):
            raise ValueError(f"checkpoint_id {self.checkpoint_id!r} does not match run {self.run_id!r} seq {self.seq}")
        if (self.parent_checkpoint_id is None) != (self.parent_checkpoint_hash is None):
            raise ValueError("parent_checkpoint_id and parent_checkpoint_hash go together")
        return self
