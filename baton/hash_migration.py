"""Migrating checkpoints sealed under the old hashing (schema 1 and 2) to Baton's canonical form (schema 3).

A version 2 checkpoint names its parts by the hash of pydantic's JSON. The
migration reads every part, converts it to its plain value, replaces each ref
to another migrated part by that part's new ref, encodes it canonically and
stores it as a new blob; then it seals a version 3 checkpoint over the new refs
with `migrated_from_hash` naming the original and `migration_ref` naming a
`PartMigration` record (original ref -> new ref for every part). Nothing is
edited: the original blobs and rows stay as they were. The same input always
gives the same output, byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from baton.checkpoints import get_record
from baton.errors import SchemaMigrationError
from baton.identity import canonical_json, plain_value
from baton.identity_legacy import legacy_ref_of
from baton.models import (
    AuthorityContext,
    BehavioralRelease,
    BudgetLedger,
    Candidate,
    CandidateManifest,
    EnvironmentIdentity,
    EvidenceManifest,
    ExecutionCheckpoint,
    Observation,
    ObservationSegment,
    OperationLedger,
    Placement,
    PortableRunState,
    Record,
    Ref,
    SearchState,
    VerifierEvidence,
    WorkspaceIdentity,
    checkpoint_id_for,
)
from baton.models.checkpoint import CHECKPOINT_SCHEMA_VERSION, LEGACY_HASH_VERSIONS
from baton.store.base import SqlStore as SqlStoreLike
from baton.store.blobs import Blobs

MIGRATED_REASON = "migrated_from_schema_v{version}"


class RefPair(Record):
    """One part before and after migration."""

    what: str = Field(min_length=1)
    original: Ref
    migrated: Ref


class PartMigration(Record):
    """The lineage of one migrated checkpoint: which original it came from and how each part was renamed."""

    original_checkpoint_hash: Ref
    from_schema_version: str
    to_schema_version: str
    parts: tuple[RefPair, ...]


def _swap(value: Any, renamed: dict[str, str]) -> Any:
    if isinstance(value, str):
        return renamed.get(value, value)
    if isinstance(value, dict):
        return {key: _swap(item, renamed) for key, item in value.items()}
    if isinstance(value, list):
        return [_swap(item, renamed) for item in value]
    return value


@dataclass
class PartGraph:
    """A checkpoint's parts, walked so that every part is rewritten after the parts it names.

    `rewrite` says how one part is re-encoded and stored; each ref is rewritten once and remembered in `renamed`,
    and a part's refs to parts already rewritten are replaced by their new refs (`swap_refs`).
    """

    blobs: Blobs
    renamed: dict[str, str] = field(default_factory=dict)

    def rewrite(self, ref: str, record: Record, model: type[Record], what: str) -> str:
        """Store the new form of `record` (read from `ref`); its new ref."""
        raise NotImplementedError

    def swap_refs(self, value: Any) -> Any:
        """`value` with every ref to a part rewritten so far replaced by the part's new ref."""
        return _swap(value, self.renamed)

    def part(self, ref: str, model: type[Record], what: str) -> str:
        """The new ref of part `ref` (read, re-encoded and stored the first time it is asked for)."""
        done = self.renamed.get(ref)
        if done is None:
            done = self.rewrite(ref, get_record(self.blobs, ref, model, what=what), model, what)
            self.renamed[ref] = done
        return done

    def optional(self, ref: str | None, model: type[Record], what: str) -> str | None:
        return None if ref is None else self.part(ref, model, what)

    def observation_log(self, head: str) -> str:
        chain: list[tuple[str, ObservationSegment]] = []
        ref: str | None = head
        while ref is not None:
            segment = get_record(self.blobs, ref, ObservationSegment, what="observation segment")
            chain.append((ref, segment))
            ref = segment.previous
        for ref, segment in reversed(chain):
            for obs_ref in segment.observation_refs:
                self.part(obs_ref, Observation, "observation")
            self.part(ref, ObservationSegment, "observation segment")
        return self.renamed[head]

    def manifest(self, ref: str, model: type[CandidateManifest] | type[EvidenceManifest], item: type[Record], what: str) -> str:
        listed = get_record(self.blobs, ref, model, what=f"{what} manifest")
        for item_ref in getattr(listed, "candidate_refs", ()) or getattr(listed, "evidence_refs", ()):
            self.part(item_ref, item, what)
        return self.part(ref, model, f"{what} manifest")

    def checkpoint_refs(self, checkpoint: ExecutionCheckpoint) -> dict[str, str | None]:
        """Every part ref of `checkpoint`, rewritten (the memory snapshot, a raw blob, is kept as it is)."""
        c = checkpoint
        return dict(
            observation_manifest_ref=self.observation_log(c.observation_manifest_ref),
            release_id=self.part(c.release_id, BehavioralRelease, "behavioral release"),
            environment_id=self.part(c.environment_id, EnvironmentIdentity, "environment identity"),
            placement_ref=self.part(c.placement_ref, Placement, "placement"),
            candidate_manifest_ref=self.manifest(c.candidate_manifest_ref, CandidateManifest, Candidate, "candidate"),
            verifier_evidence_ref=self.manifest(c.verifier_evidence_ref, EvidenceManifest, VerifierEvidence,
                                                "verifier evidence"),
            workspace_snapshot_ref=self.optional(c.workspace_snapshot_ref, WorkspaceIdentity, "workspace identity"),
            search_state_ref=self.optional(c.search_state_ref, SearchState, "search state"),
            memory_snapshot_ref=c.memory_snapshot_ref,
            task_state_ref=self.part(c.task_state_ref, PortableRunState, "run state"),
            operation_ledger_ref=self.part(c.operation_ledger_ref, OperationLedger, "operation ledger"),
            authority_context_ref=self.part(c.authority_context_ref, AuthorityContext, "authority context"),
            budget_ledger_ref=self.part(c.budget_ledger_ref, BudgetLedger, "budget ledger"),
        )


@dataclass
class PartRewriter(PartGraph):
    """Re-encodes parts into the canonical form, remembering every rename (one per run chain)."""

    known: dict[str, str] = field(default_factory=dict)
    touched: dict[str, RefPair] = field(default_factory=dict)

    @classmethod
    def with_known(cls, blobs: Blobs, records: Iterable[Record] = ()) -> PartRewriter:
        """A rewriter that also renames refs to `records` kept outside the store (a release catalog)."""
        return cls(blobs, known={legacy_ref_of(r.model_dump(mode="json")): r.record_ref() for r in records})

    def swap_refs(self, value: Any) -> Any:
        return _swap(value, {**self.known, **self.renamed})

    def rewrite(self, ref: str, record: Record, model: type[Record], what: str) -> str:
        data = canonical_json(self.swap_refs(plain_value(record)))
        again = model.from_canonical(data)
        if again.canonical() != data:
            raise SchemaMigrationError(f"{what} {ref}: its canonical form does not survive a round trip")
        return self.blobs.put(data)

    def part(self, ref: str, model: type[Record], what: str) -> str:
        migrated = super().part(ref, model, what)
        self.touched.setdefault(ref, RefPair(what=what, original=ref, migrated=migrated))
        return migrated

    def take_lineage(self) -> tuple[RefPair, ...]:
        pairs = tuple(sorted(self.touched.values(), key=lambda pair: (pair.original, pair.what)))
        self.touched = {}
        return pairs


def migrate_checkpoint(
    old: ExecutionCheckpoint, rewriter: PartRewriter, *, parent: ExecutionCheckpoint | None
) -> ExecutionCheckpoint:
    """The schema 3 form of `old` (itself when it is schema 3 and its parent did not change).

    `parent` is the already migrated parent (None for seq 0). Parts are
    written to the rewriter's blob store, which must hold the originals.
    """
    if (old.parent_checkpoint_hash is None) != (parent is None):
        raise SchemaMigrationError(f"checkpoint {old.checkpoint_id}: pass its migrated parent (and only then)")
    if parent is not None and parent.checkpoint_id != old.parent_checkpoint_id:
        raise SchemaMigrationError(
            f"checkpoint {old.checkpoint_id}: parent {parent.checkpoint_id} is not its parent {old.parent_checkpoint_id}"
        )
    parent_hash = None if parent is None else parent.checkpoint_hash
    if old.schema_version not in LEGACY_HASH_VERSIONS and parent_hash == old.parent_checkpoint_hash:
        return old
    return _sealed_migration(old, rewriter, parent_checkpoint_hash=parent_hash)


def migrate_forward(old: ExecutionCheckpoint, rewriter: PartRewriter, *, owner_epoch: int) -> ExecutionCheckpoint:
    """The schema 3 form of `old` sealed as the run's NEXT checkpoint (seq + 1, parent `old`), at `owner_epoch`.

    The in-place form of `migrate_checkpoint` for a live run (a handoff's schema transform): the chain keeps
    `old` and gains its successor, so nothing before it is rewritten. Deterministic like the chain migration.
    """
    if old.schema_version not in LEGACY_HASH_VERSIONS:
        raise SchemaMigrationError(f"checkpoint {old.checkpoint_id} is at schema {old.schema_version}: nothing to migrate")
    if owner_epoch < old.owner_epoch:
        raise SchemaMigrationError(f"checkpoint {old.checkpoint_id}: owner epoch {owner_epoch} is below its "
                                   f"{old.owner_epoch}")
    return _sealed_migration(
        old, rewriter, seq=old.seq + 1, checkpoint_id=checkpoint_id_for(old.run_id, old.seq + 1),
        parent_checkpoint_id=old.checkpoint_id, parent_checkpoint_hash=old.checkpoint_hash, owner_epoch=owner_epoch,
    )


def _sealed_migration(old: ExecutionCheckpoint, rewriter: PartRewriter, **placed: Any) -> ExecutionCheckpoint:
    """`old` rewritten at schema 3 over its rewritten parts, naming it and its lineage; `placed` sets where it goes
    in the chain (seq, id, parent, epoch)."""
    r = rewriter
    refs = r.checkpoint_refs(old)
    lineage = PartMigration(
        original_checkpoint_hash=old.checkpoint_hash,
        from_schema_version=old.schema_version,
        to_schema_version=CHECKPOINT_SCHEMA_VERSION,
        parts=r.take_lineage(),
    )
    fields = {name: getattr(old, name) for name in type(old).model_fields if name != "checkpoint_hash"}
    reason = MIGRATED_REASON.format(version=old.schema_version)
    fields.update(
        refs,
        **placed,
        schema_version=CHECKPOINT_SCHEMA_VERSION,
        migrated_from_hash=old.checkpoint_hash,
        migration_ref=r.blobs.put(lineage.canonical()),
        resumability_reasons=(*old.resumability_reasons, reason) if reason not in old.resumability_reasons
        else old.resumability_reasons,
    )
    return ExecutionCheckpoint.seal(**fields)


def migrate_run_chain(
    chain: Sequence[ExecutionCheckpoint], rewriter: PartRewriter
) -> tuple[ExecutionCheckpoint, ...]:
    """Migrate one run's chain (seq 0 onward, no gaps) so the migrated chain links to itself."""
    ordered = sorted(chain, key=lambda checkpoint: checkpoint.seq)
    migrated: list[ExecutionCheckpoint] = []
    for old in ordered:
        migrated.append(migrate_checkpoint(old, rewriter, parent=migrated[-1] if migrated else None))
    return tuple(migrated)


def lineage_of(checkpoint: ExecutionCheckpoint, blobs: Blobs) -> PartMigration:
    """The `PartMigration` record a migrated checkpoint names (SchemaMigrationError if it names none)."""
    if checkpoint.migration_ref is None:
        raise SchemaMigrationError(f"checkpoint {checkpoint.checkpoint_id} was not migrated by hash migration")
    return get_record(blobs, checkpoint.migration_ref, PartMigration, what="migration lineage")


@dataclass(frozen=True)
class RunMigration:
    """What `migrate_store` did for one run: original checkpoint hash -> migrated hash, in seq order."""

    run_id: str
    hashes: tuple[tuple[str, str], ...]
    blobs_copied: int


def migrate_store(
    source: SqlStoreLike,
    source_blobs: Blobs,
    dest: SqlStoreLike,
    dest_blobs: Blobs,
    *,
    known: Iterable[Record] = (),
) -> list[RunMigration]:
    """Migrate every run of `source` into the empty store `dest`; `source` is only read.

    `dest` gets each run (same id, kind, placement, status; the release id
    renamed), a copy of every blob the original checkpoints reach (so the
    lineage resolves there), the new parts, and the migrated chain. Leases,
    events and the gateway's operation tables stay in `source`.
    """
    from baton.bundle import reachable_refs  # bundle imports schema_versions, which imports checkpoints

    reports: list[RunMigration] = []
    for run in sorted(source.list_runs(), key=lambda r: r.run_id):
        chain = source.list_checkpoints(run.run_id)
        refs = sorted(reachable_refs(chain, source_blobs)) if chain else []
        dest_blobs.put_many(source_blobs.get_many(refs))
        rewriter = PartRewriter.with_known(dest_blobs, known)
        migrated = migrate_run_chain(chain, rewriter)
        names = {**rewriter.known, **rewriter.renamed}
        dest.create_run(run.run_id, run.kind, names.get(run.release_id, run.release_id), run.placement,
                        {**run.detail, "migrated_to_schema": CHECKPOINT_SCHEMA_VERSION})
        for checkpoint in migrated:
            dest.append_checkpoint(checkpoint)
        if run.status != "active":
            dest.set_run_status(run.run_id, run.status)
        pairs = tuple((old.checkpoint_hash, new.checkpoint_hash) for old, new in zip(chain, migrated, strict=True))
        reports.append(RunMigration(run_id=run.run_id, hashes=pairs, blobs_copied=len(refs)))
    return reports
