"""Sealing checkpoints and restoring runs from them.

A checkpoint is a small manifest of refs. Each part of the run (state,
candidates, evidence, ledgers, authority, placement) is stored as a blob by
content, so a part that did not change since the parent costs nothing, and the
observation log is a chain of segments that each hold only what was added.
Restoring fetches and verifies every ref; nothing else is needed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from baton.errors import BlobNotFoundError, CheckpointIntegrityError, IntegrityError
from baton.models import (
    AuthorityContext,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    Candidate,
    CandidateManifest,
    EvidenceManifest,
    ExecutionCheckpoint,
    Observation,
    ObservationSegment,
    OperationLedger,
    Placement,
    PortabilityConstraints,
    PortableRunState,
    Record,
    ResumabilityClass,
    RunKind,
    SearchState,
    VerifierEvidence,
    WorkspaceIdentity,
    checkpoint_id_for,
)
from baton.identity import sha256_ref
from baton.secret_scan import ensure_no_secrets
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.store.sql_blobs import SqlBlobStore
from baton.store.staging import StagedBlobs

R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class RunParts:
    """The logical state of a run, as records, apart from its observation log."""

    run_kind: RunKind
    release: BehavioralRelease
    placement: Placement
    state: PortableRunState
    operations: OperationLedger
    authority: AuthorityContext
    budget: BudgetLedger
    candidates: tuple[Candidate, ...] = ()
    evidence: tuple[VerifierEvidence, ...] = ()
    constraints: PortabilityConstraints = field(default_factory=PortabilityConstraints)
    workspace: WorkspaceIdentity | None = None
    search: SearchState | None = None

    @property
    def current_candidate(self) -> Candidate | None:
        return self.candidates[-1] if self.candidates else None


@dataclass(frozen=True)
class RestoredRun:
    """A checkpoint with every part it references fetched and verified."""

    checkpoint: ExecutionCheckpoint
    parts: RunParts
    observations: tuple[Observation, ...]


def put_record(blobs: Blobs, record: Record) -> str:
    """Store a record's canonical JSON; return its ref."""
    return blobs.put(record.canonical())


def get_record(blobs: Blobs, ref: str, model: type[R], *, what: str) -> R:
    """Fetch, verify and parse one record; missing or corrupt parts name what they were."""
    try:
        data = blobs.get(ref)
    except BlobNotFoundError as exc:
        raise CheckpointIntegrityError(f"{what} {ref} is missing from the blob store") from exc
    except IntegrityError as exc:
        raise CheckpointIntegrityError(f"{what} {ref} is corrupt: {exc}") from exc
    return model.from_canonical(data)


_ENCODED: dict[int, tuple[Record, bytes, str]] = {}
_ENCODED_LIMIT = 512


def _encoded(record: Record) -> tuple[bytes, str]:
    """Canonical bytes and ref of a record, remembered for the same (immutable) object.

    A run keeps most parts unchanged between checkpoints; re-encoding them at
    every seal would cost more than everything else sealing does.
    """
    cached = _ENCODED.get(id(record))
    if cached is not None and cached[0] is record:
        return cached[1], cached[2]
    data = record.canonical()
    ref = sha256_ref(data)
    if len(_ENCODED) >= _ENCODED_LIMIT:
        _ENCODED.clear()
    _ENCODED[id(record)] = (record, data, ref)
    return data, ref


_SEGMENT_TOTALS: dict[str, int] = {}


def _segment_total(blobs: Blobs, ref: str) -> int:
    """How many observations the log ending at segment `ref` holds (remembered per ref)."""
    total = _SEGMENT_TOTALS.get(ref)
    if total is None:
        total = get_record(blobs, ref, ObservationSegment, what="observation segment").total
        if len(_SEGMENT_TOTALS) >= _ENCODED_LIMIT:
            _SEGMENT_TOTALS.clear()
        _SEGMENT_TOTALS[ref] = total
    return total


class _PartWriter:
    """Encodes parts to refs first, so new content is scanned for secrets before anything is written."""

    def __init__(self, blobs: Blobs) -> None:
        self.blobs = blobs
        self.parts: dict[str, tuple[str, Record, bytes]] = {}
        self.raw: dict[str, bytes] = {}

    def add_raw(self, data: bytes) -> str:
        """Raw content (observation bytes, artifacts): stored, not scanned (it is evidence, not state)."""
        ref = sha256_ref(data)
        self.raw[ref] = data
        return ref

    def add(self, label: str, record: Record) -> str:
        data, ref = _encoded(record)
        self.parts.setdefault(ref, (label, record, data))
        return ref

    def write(self, *, scan_secrets: bool) -> None:
        """Scan the new parts, then store every new part and raw content (one lookup for all)."""
        stored = self.blobs.stored_hint([*self.parts, *self.raw])
        new = {ref: part for ref, part in self.parts.items() if ref not in stored}
        if scan_secrets:
            ensure_no_secrets((label, record.model_dump(mode="json")) for label, record, _ in new.values())
        fresh = {ref: data for ref, data in self.raw.items() if ref not in stored}
        fresh.update({ref: data for ref, (_, _, data) in new.items()})
        self.blobs.put_many(fresh)


def _observation_manifest(
    writer: _PartWriter, parent: ExecutionCheckpoint | None, new_observations: Sequence[Observation]
) -> str:
    if parent is not None and not new_observations:
        return parent.observation_manifest_ref
    previous_total = 0
    previous_ref: str | None = None
    if parent is not None:
        previous_ref = parent.observation_manifest_ref
        previous_total = _segment_total(writer.blobs, previous_ref)
    refs = tuple(writer.add(f"observation of {o.source}", o) for o in new_observations)
    segment = ObservationSegment(previous=previous_ref, observation_refs=refs, total=previous_total + len(refs))
    ref = writer.add("observation segment", segment)
    _SEGMENT_TOTALS[ref] = segment.total
    return ref


def build_checkpoint(
    blobs: Blobs,
    *,
    run_id: str,
    parts: RunParts,
    new_observations: Sequence[Observation],
    parent: ExecutionCheckpoint | None,
    boundary: Boundary,
    resumability: ResumabilityClass,
    resumability_reasons: Sequence[str],
    owner_epoch: int,
    sealed_at: dt.datetime,
    scan_secrets: bool = True,
    contents: Sequence[bytes] = (),
) -> ExecutionCheckpoint:
    """Write every new part as blobs and return the sealed (not yet recorded) checkpoint.

    `contents` are raw bytes the parts refer to (observation contents,
    artifacts), stored alongside the parts.

    Parts already stored cost nothing (same bytes, same ref). New parts are
    scanned for credentials first: SecretInStateError leaves nothing written.
    """
    writer = _PartWriter(blobs)
    add = writer.add
    for data in contents:
        writer.add_raw(data)
    seq = 0 if parent is None else parent.seq + 1
    candidate_refs = tuple(add(f"candidate {c.candidate_id}", c) for c in parts.candidates)
    evidence_refs = tuple(add("verifier evidence", e) for e in parts.evidence)
    fields = dict(
        release_id=add("behavioral release", parts.release),
        environment_id=add("environment identity", parts.placement.environment),
        placement_ref=add("placement", parts.placement),
        task_state_ref=add("run state", parts.state),
        observation_manifest_ref=_observation_manifest(writer, parent, new_observations),
        candidate_manifest_ref=add("candidate manifest", CandidateManifest(candidate_refs=candidate_refs)),
        verifier_evidence_ref=add("evidence manifest", EvidenceManifest(evidence_refs=evidence_refs)),
        workspace_snapshot_ref=None if parts.workspace is None else add("workspace identity", parts.workspace),
        search_state_ref=None if parts.search is None else add("search state", parts.search),
        operation_ledger_ref=add("operation ledger", parts.operations),
        authority_context_ref=add("authority context", parts.authority),
        budget_ledger_ref=add("budget ledger", parts.budget),
    )
    writer.write(scan_secrets=scan_secrets)
    return ExecutionCheckpoint.seal(
        run_id=run_id,
        checkpoint_id=checkpoint_id_for(run_id, seq),
        seq=seq,
        parent_checkpoint_id=None if parent is None else parent.checkpoint_id,
        parent_checkpoint_hash=None if parent is None else parent.checkpoint_hash,
        run_kind=parts.run_kind,
        constraints=parts.constraints,
        owner_epoch=owner_epoch,
        boundary=boundary,
        resumability=resumability,
        resumability_reasons=tuple(resumability_reasons),
        sealed_at=sealed_at,
        **fields,
    )


def seal_checkpoint(
    store: SqlStore,
    blobs: Blobs,
    *,
    contents: Sequence[bytes] = (),
    **build: Any,
) -> ExecutionCheckpoint:
    """Build a checkpoint and record it, making its new blobs durable with it.

    `contents` are raw bytes the new parts refer to (observation contents,
    artifacts). With the SQL blob backend of the same store, blobs and the
    checkpoint row commit in one transaction; with files, the blobs are made
    durable first, then the row is committed.
    """
    staged = StagedBlobs(blobs)
    checkpoint = build_checkpoint(staged, contents=contents, **build)
    if isinstance(blobs, SqlBlobStore) and blobs.store is store:
        store.append_checkpoint(checkpoint, blobs=staged.pending)
        blobs.mark_stored(staged.pending)
    else:
        blobs.put_many(staged.pending)
        store.append_checkpoint(checkpoint)
    return checkpoint


def load_observations(blobs: Blobs, manifest_ref: str) -> tuple[Observation, ...]:
    """Walk the observation segment chain, oldest first."""
    segments: list[ObservationSegment] = []
    ref: str | None = manifest_ref
    while ref is not None:
        segment = get_record(blobs, ref, ObservationSegment, what="observation segment")
        segments.append(segment)
        ref = segment.previous
    observations = [
        get_record(blobs, obs_ref, Observation, what="observation")
        for segment in reversed(segments)
        for obs_ref in segment.observation_refs
    ]
    if segments and len(observations) != segments[0].total:
        raise CheckpointIntegrityError(
            f"observation log {manifest_ref} claims {segments[0].total} entries but holds {len(observations)}"
        )
    return tuple(observations)


def restore(blobs: Blobs, checkpoint: ExecutionCheckpoint) -> RestoredRun:
    """Fetch and verify every part of `checkpoint`.

    The release and placement refs are checked against the ids the checkpoint
    records, so a part swapped for another is caught.
    """
    release = get_record(blobs, checkpoint.release_id, BehavioralRelease, what="behavioral release")
    placement = get_record(blobs, checkpoint.placement_ref, Placement, what="placement")
    if placement.environment.environment_id != checkpoint.environment_id:
        raise CheckpointIntegrityError(
            f"checkpoint {checkpoint.checkpoint_id}: placement environment does not match environment_id"
        )
    candidates = get_record(blobs, checkpoint.candidate_manifest_ref, CandidateManifest, what="candidate manifest")
    evidence = get_record(blobs, checkpoint.verifier_evidence_ref, EvidenceManifest, what="evidence manifest")
    parts = RunParts(
        run_kind=checkpoint.run_kind,
        release=release,
        placement=placement,
        state=get_record(blobs, checkpoint.task_state_ref, PortableRunState, what="run state"),
        operations=get_record(blobs, checkpoint.operation_ledger_ref, OperationLedger, what="operation ledger"),
        authority=get_record(blobs, checkpoint.authority_context_ref, AuthorityContext, what="authority context"),
        budget=get_record(blobs, checkpoint.budget_ledger_ref, BudgetLedger, what="budget ledger"),
        candidates=tuple(get_record(blobs, ref, Candidate, what="candidate") for ref in candidates.candidate_refs),
        evidence=tuple(
            get_record(blobs, ref, VerifierEvidence, what="verifier evidence") for ref in evidence.evidence_refs
        ),
        constraints=checkpoint.constraints,
        workspace=None
        if checkpoint.workspace_snapshot_ref is None
        else get_record(blobs, checkpoint.workspace_snapshot_ref, WorkspaceIdentity, what="workspace identity"),
        search=None
        if checkpoint.search_state_ref is None
        else get_record(blobs, checkpoint.search_state_ref, SearchState, what="search state"),
    )
    observations = load_observations(blobs, checkpoint.observation_manifest_ref)
    return RestoredRun(checkpoint=checkpoint, parts=parts, observations=observations)
