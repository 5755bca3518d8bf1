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
from typing import TypeVar

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
from baton.secret_scan import ensure_no_secrets
from baton.store.blobs import BlobStore

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


def put_record(blobs: BlobStore, record: Record) -> str:
    """Store a record's canonical JSON; return its ref."""
    return blobs.put(record.canonical())


def get_record(blobs: BlobStore, ref: str, model: type[R], *, what: str) -> R:
    """Fetch, verify and parse one record; missing or corrupt parts name what they were."""
    try:
        data = blobs.get(ref)
    except BlobNotFoundError as exc:
        raise CheckpointIntegrityError(f"{what} {ref} is missing from the blob store") from exc
    except IntegrityError as exc:
        raise CheckpointIntegrityError(f"{what} {ref} is corrupt: {exc}") from exc
    return model.from_canonical(data)


def _scan_for_secrets(parts: RunParts, new_observations: Sequence[Observation]) -> None:
    texts: list[tuple[str, str]] = [
        ("run state", parts.state.canonical().decode()),
        ("authority context", parts.authority.canonical().decode()),
        ("operation ledger", parts.operations.canonical().decode()),
    ]
    texts += [(f"candidate {c.candidate_id}", c.canonical().decode()) for c in parts.candidates]
    texts += [("verifier evidence", e.canonical().decode()) for e in parts.evidence]
    texts += [(f"observation of {o.source}", o.canonical().decode()) for o in new_observations]
    if parts.workspace is not None:
        texts.append(("workspace identity", parts.workspace.canonical().decode()))
    ensure_no_secrets(texts)


def _observation_manifest(
    blobs: BlobStore, parent: ExecutionCheckpoint | None, new_observations: Sequence[Observation]
) -> str:
    if parent is not None and not new_observations:
        return parent.observation_manifest_ref
    previous_total = 0
    previous_ref: str | None = None
    if parent is not None:
        previous_ref = parent.observation_manifest_ref
        previous_total = get_record(blobs, previous_ref, ObservationSegment, what="observation segment").total
    refs = tuple(put_record(blobs, observation) for observation in new_observations)
    segment = ObservationSegment(previous=previous_ref, observation_refs=refs, total=previous_total + len(refs))
    return put_record(blobs, segment)


def build_checkpoint(
    blobs: BlobStore,
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
) -> ExecutionCheckpoint:
    """Write every part as blobs and return the sealed (not yet recorded) checkpoint.

    Raises SecretInStateError before writing anything if state holds a credential.
    """
    if scan_secrets:
        _scan_for_secrets(parts, new_observations)
    seq = 0 if parent is None else parent.seq + 1
    candidate_manifest = CandidateManifest(candidate_refs=tuple(put_record(blobs, c) for c in parts.candidates))
    evidence_manifest = EvidenceManifest(evidence_refs=tuple(put_record(blobs, e) for e in parts.evidence))
    return ExecutionCheckpoint.seal(
        run_id=run_id,
        checkpoint_id=checkpoint_id_for(run_id, seq),
        seq=seq,
        parent_checkpoint_id=None if parent is None else parent.checkpoint_id,
        parent_checkpoint_hash=None if parent is None else parent.checkpoint_hash,
        run_kind=parts.run_kind,
        release_id=put_record(blobs, parts.release),
        environment_id=put_record(blobs, parts.placement.environment),
        placement_ref=put_record(blobs, parts.placement),
        task_state_ref=put_record(blobs, parts.state),
        observation_manifest_ref=_observation_manifest(blobs, parent, new_observations),
        candidate_manifest_ref=put_record(blobs, candidate_manifest),
        verifier_evidence_ref=put_record(blobs, evidence_manifest),
        workspace_snapshot_ref=None if parts.workspace is None else put_record(blobs, parts.workspace),
        search_state_ref=None if parts.search is None else put_record(blobs, parts.search),
        operation_ledger_ref=put_record(blobs, parts.operations),
        authority_context_ref=put_record(blobs, parts.authority),
        budget_ledger_ref=put_record(blobs, parts.budget),
        constraints=parts.constraints,
        owner_epoch=owner_epoch,
        boundary=boundary,
        resumability=resumability,
        resumability_reasons=tuple(resumability_reasons),
        sealed_at=sealed_at,
    )


def load_observations(blobs: BlobStore, manifest_ref: str) -> tuple[Observation, ...]:
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


def restore(blobs: BlobStore, checkpoint: ExecutionCheckpoint) -> RestoredRun:
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
