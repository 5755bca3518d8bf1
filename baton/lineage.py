"""The platform's read model: what is new in Baton's event log since event seq N.

A reader (a Dagster sensor, a report) keeps the last seq it read as its high
-water mark and asks `changes_since(store, blobs, after_seq)` for the window
after it. The answer names new runs, finished runs, the latest version of each
per-run asset that changed in the window (`observations`, `candidates`,
`verifier_evidence`, `checkpoints`), every identity change between consecutive
checkpoints (release, environment, artifact, workspace base), and evidence
recorded outside checkpoints (reverification). `lapsed_leases` names the active
runs whose owner is gone, judged by the database clock.

Every version's data version is a content hash: the observation log head, the
current candidate's artifact hash, the newest evidence record's ref, the
checkpoint hash. Nothing here imports Dagster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import JsonValue

from baton.checkpoints import get_record
from baton.models import (
    Candidate,
    CandidateManifest,
    Event,
    EventType,
    EvidenceManifest,
    ExecutionCheckpoint,
    ObservationSegment,
    VerifierEvidence,
    WorkspaceIdentity,
)
from baton.store.base import SqlStore
from baton.store.blobs import Blobs

OBSERVATIONS = "observations"
CANDIDATES = "candidates"
VERIFIER_EVIDENCE = "verifier_evidence"
CHECKPOINTS = "checkpoints"
ASSETS: tuple[str, ...] = (OBSERVATIONS, CANDIDATES, VERIFIER_EVIDENCE, CHECKPOINTS)
"""The per-run assets, upstream first."""

DEFAULT_WINDOW = 5000
"""Events read per call at most; the next call continues from the returned high-water mark."""


class IdentityKind(StrEnum):
    RELEASE = "release"
    ENVIRONMENT = "environment"
    ARTIFACT = "artifact"
    WORKSPACE = "workspace"


@dataclass(frozen=True)
class AssetVersion:
    """The newest version of one per-run asset in a window, with what an analyst needs to read it."""

    asset: str
    run_id: str
    data_version: str
    seq: int
    checkpoint_id: str
    parent_version: str | None
    input_versions: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class IdentityChange:
    """One identity of a run differing from its previous checkpoint's."""

    run_id: str
    seq: int
    kind: IdentityKind
    before: str | None
    after: str | None
    checkpoint_id: str
    evidence_was_bound: bool = False
    """For an artifact change: the previous checkpoint held evidence bound to the previous candidate."""


@dataclass(frozen=True)
class RunEnded:
    run_id: str
    seq: int
    status: str


@dataclass(frozen=True)
class RecordedEvidence:
    """Evidence recorded by a reverification (an EVIDENCE_RECORDED event), not by a checkpoint."""

    run_id: str
    seq: int
    evidence_ref: str
    candidate_hash: str
    result: str


@dataclass(frozen=True)
class LineageDelta:
    """Everything new in the events (after_seq, high_water]."""

    after_seq: int
    high_water: int
    new_runs: tuple[str, ...] = ()
    ended: tuple[RunEnded, ...] = ()
    versions: tuple[AssetVersion, ...] = ()
    identity_changes: tuple[IdentityChange, ...] = ()
    recorded_evidence: tuple[RecordedEvidence, ...] = ()

    def versions_of(self, asset: str) -> list[AssetVersion]:
        return [v for v in self.versions if v.asset == asset]


@dataclass(frozen=True)
class _Facts:
    """What one checkpoint says about each asset, read from its manifests."""

    checkpoint: ExecutionCheckpoint
    observation_count: int
    candidates: tuple[str, ...]
    candidate: Candidate | None
    evidence_refs: tuple[str, ...]
    evidence: VerifierEvidence | None
    workspace_base: str | None

    @property
    def artifact(self) -> str | None:
        return None if self.candidate is None else self.candidate.artifact_hash

    @property
    def evidence_ref(self) -> str | None:
        return self.evidence_refs[-1] if self.evidence_refs else None

    @property
    def evidence_bound(self) -> bool:
        """The newest evidence verified exactly the current candidate."""
        return self.evidence is not None and self.artifact is not None and self.evidence.applies_to(self.artifact)


class _Reader:
    """Reads checkpoint facts once per checkpoint per call."""

    def __init__(self, store: SqlStore, blobs: Blobs) -> None:
        self.store, self.blobs = store, blobs
        self._facts: dict[str, _Facts] = {}

    def facts(self, checkpoint: ExecutionCheckpoint) -> _Facts:
        known = self._facts.get(checkpoint.checkpoint_id)
        if known is not None:
            return known
        blobs = self.blobs
        segment = get_record(blobs, checkpoint.observation_manifest_ref, ObservationSegment, what="observation segment")
        candidates = get_record(blobs, checkpoint.candidate_manifest_ref, CandidateManifest, what="candidate manifest")
        evidence = get_record(blobs, checkpoint.verifier_evidence_ref, EvidenceManifest, what="evidence manifest")
        workspace = None if checkpoint.workspace_snapshot_ref is None else get_record(
            blobs, checkpoint.workspace_snapshot_ref, WorkspaceIdentity, what="workspace identity")
        facts = _Facts(
            checkpoint=checkpoint,
            observation_count=segment.total,
            candidates=candidates.candidate_refs,
            candidate=None if not candidates.candidate_refs else get_record(
                blobs, candidates.candidate_refs[-1], Candidate, what="candidate"),
            evidence_refs=evidence.evidence_refs,
            evidence=None if not evidence.evidence_refs else get_record(
                blobs, evidence.evidence_refs[-1], VerifierEvidence, what="verifier evidence"),
            workspace_base=None if workspace is None else workspace.base_commit,
        )
        self._facts[checkpoint.checkpoint_id] = facts
        return facts

    def parent(self, checkpoint: ExecutionCheckpoint) -> ExecutionCheckpoint | None:
        if checkpoint.parent_checkpoint_id is None:
            return None
        return self.store.get_checkpoint(checkpoint.parent_checkpoint_id)


def open_commands(run_id: str, checkpoint_id: str) -> dict[str, JsonValue]:
    """How to open a version from a shell."""
    return {"open_run": f"baton inspect {run_id}", "open_checkpoint": f"baton checkpoint show {checkpoint_id}"}


def _common(ckpt: ExecutionCheckpoint) -> dict[str, JsonValue]:
    return {
        "run": ckpt.run_id,
        "release_id": ckpt.release_id,
        "environment_id": ckpt.environment_id,
        "epoch": ckpt.owner_epoch,
        "boundary": ckpt.boundary.value,
        "resumability": ckpt.resumability.value,
        "checkpoint_id": ckpt.checkpoint_id,
        "checkpoint_hash": ckpt.checkpoint_hash,
        **open_commands(ckpt.run_id, ckpt.checkpoint_id),
    }


def _versions(seq: int, now: _Facts, before: _Facts | None) -> list[AssetVersion]:
    """The assets whose version at `now` differs from `before` (every asset when there is no before)."""
    ckpt = now.checkpoint
    common = _common(ckpt)
    found: list[AssetVersion] = []
    prev = before.checkpoint if before is not None else None
    if prev is None or prev.observation_manifest_ref != ckpt.observation_manifest_ref:
        found.append(AssetVersion(
            OBSERVATIONS, ckpt.run_id, ckpt.observation_manifest_ref, seq, ckpt.checkpoint_id,
            None if prev is None else prev.observation_manifest_ref,
            metadata={**common, "observation_log_head": ckpt.observation_manifest_ref,
                      "observations": now.observation_count},
        ))
    if now.candidate is not None and (before is None or before.artifact != now.artifact):
        found.append(AssetVersion(
            CANDIDATES, ckpt.run_id, now.candidate.artifact_hash, seq, ckpt.checkpoint_id,
            None if before is None else before.artifact,
            input_versions={OBSERVATIONS: ckpt.observation_manifest_ref},
            metadata={**common, "candidate_id": now.candidate.candidate_id, "kind": now.candidate.kind,
                      "artifact_hash": now.candidate.artifact_hash, "candidates": len(now.candidates),
                      "produced_by_release": now.candidate.produced_by_release},
        ))
    if now.evidence is not None and now.evidence_ref is not None and (before is None or before.evidence_ref != now.evidence_ref):
        found.append(AssetVersion(
            VERIFIER_EVIDENCE, ckpt.run_id, now.evidence_ref, seq, ckpt.checkpoint_id,
            None if before is None else before.evidence_ref,
            # The candidate this evidence verified, not whatever is current: staleness follows the binding.
            input_versions={CANDIDATES: now.evidence.candidate_hash},
            metadata={**common, "candidate_hash": now.evidence.candidate_hash, "result": now.evidence.result.value,
                      "verifier_version": now.evidence.verifier_version, "evidence": len(now.evidence_refs),
                      "bound_to_current_candidate": now.evidence_bound, "source": "worker"},
        ))
    found.append(AssetVersion(
        CHECKPOINTS, ckpt.run_id, ckpt.checkpoint_hash, seq, ckpt.checkpoint_id,
        ckpt.parent_checkpoint_hash,
        input_versions={} if now.evidence_ref is None else {VERIFIER_EVIDENCE: now.evidence_ref},
        metadata={**common, "seq": ckpt.seq, "parent_checkpoint_hash": ckpt.parent_checkpoint_hash,
                  "sealed_at": ckpt.sealed_at.isoformat()},
    ))
    return found


def _identity_changes(seq: int, now: _Facts, before: _Facts | None) -> list[IdentityChange]:
    if before is None:
        return []
    ckpt, prev = now.checkpoint, before.checkpoint
    pairs = (
        (IdentityKind.RELEASE, prev.release_id, ckpt.release_id),
        (IdentityKind.ENVIRONMENT, prev.environment_id, ckpt.environment_id),
        (IdentityKind.ARTIFACT, before.artifact, now.artifact),
        (IdentityKind.WORKSPACE, before.workspace_base, now.workspace_base),
    )
    return [
        IdentityChange(ckpt.run_id, seq, kind, old, new, ckpt.checkpoint_id,
                       evidence_was_bound=kind is IdentityKind.ARTIFACT and before.evidence_bound)
        for kind, old, new in pairs
        if old != new and not (kind is IdentityKind.WORKSPACE and old is None)
    ]


def _restated(event: Event) -> bool:
    """The handoff coordinator re-states the checkpoint it moves (its event names the request): nothing new."""
    return "request_seq" in event.detail


def changes_since(store: SqlStore, blobs: Blobs, after_seq: int, *, window: int = DEFAULT_WINDOW) -> LineageDelta:
    """What the events after `after_seq` (at most `window` of them) added; `high_water` is the last seq read."""
    events = store.list_events(after_seq=after_seq, limit=window)
    if not events:
        return LineageDelta(after_seq=after_seq, high_water=after_seq)
    reader = _Reader(store, blobs)
    new_runs: list[str] = []
    ended: list[RunEnded] = []
    recorded: list[RecordedEvidence] = []
    changes: list[IdentityChange] = []
    sealed: dict[str, list[tuple[int, str]]] = {}
    for seq, event in events:
        if event.event_type is EventType.RUN_CREATED and event.run_id not in new_runs:
            new_runs.append(event.run_id)
        elif event.event_type is EventType.RUN_FINISHED:
            ended.append(RunEnded(event.run_id, seq, event.reason or str(event.detail.get("status", ""))))
        elif event.event_type is EventType.CHECKPOINT_SEALED and event.checkpoint_id and not _restated(event):
            if not any(cid == event.checkpoint_id for _, cid in sealed.get(event.run_id, [])):
                sealed.setdefault(event.run_id, []).append((seq, event.checkpoint_id))
        elif event.event_type is EventType.EVIDENCE_RECORDED:
            detail = event.detail
            recorded.append(RecordedEvidence(event.run_id, seq, str(detail.get("evidence_ref", "")),
                                             str(detail.get("candidate_hash", "")), str(detail.get("result", ""))))
    versions: list[AssetVersion] = []
    for run_id, checkpoints in sealed.items():
        first = store.get_checkpoint(checkpoints[0][1])
        if run_id not in new_runs and first.seq == 0:
            new_runs.append(run_id)  # created before the window, first checkpoint inside it (or never announced)
        parent = reader.parent(first)
        baseline = None if parent is None else reader.facts(parent)
        previous = baseline
        for seq, checkpoint_id in checkpoints:
            # The first one is read already: each checkpoint costs one read (and one hash re-check) per call.
            current = reader.facts(first if checkpoint_id == first.checkpoint_id else store.get_checkpoint(checkpoint_id))
            changes += _identity_changes(seq, current, previous)
            previous = current
        assert previous is not None
        versions += _versions(checkpoints[-1][0], previous, baseline)
    return LineageDelta(
        after_seq=after_seq, high_water=events[-1][0], new_runs=tuple(new_runs), ended=tuple(ended),
        versions=tuple(versions), identity_changes=tuple(changes), recorded_evidence=tuple(recorded),
    )


def latest_versions(store: SqlStore, blobs: Blobs, run_id: str) -> list[AssetVersion]:
    """The current version of every asset of one run (its newest checkpoint), e.g. to backfill a partition."""
    latest = store.latest_checkpoint(run_id)
    if latest is None:
        return []
    return _versions(0, _Reader(store, blobs).facts(latest), None)


@dataclass(frozen=True)
class LapsedLease:
    """An active run whose lease nobody holds, by the database clock at `now`."""

    run_id: str
    owner: str | None
    epoch: int
    expires_at: dt.datetime | None
    now: dt.datetime


def lapsed_leases(store: SqlStore) -> list[LapsedLease]:
    """Active runs whose owner is gone (an expired or released lease) or that came in by import and await one."""
    now, leases = store.lapsed_leases()
    return [LapsedLease(lease.run_id, lease.owner, lease.epoch, lease.expires_at, now) for lease in leases]

