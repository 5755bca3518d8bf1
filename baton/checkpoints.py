"""Sealing checkpoints and restoring runs from them.

A checkpoint is a small manifest of refs. Each part of the run (state,
candidates, evidence, ledgers, authority, placement) is stored as a blob by
content, so a part that did not change since the parent costs nothing, and the
observation log is a chain of segments that each hold only what was added.
Restoring fetches and verifies every ref; nothing else is needed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
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
    Event,
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
from baton.identity_legacy import legacy_ref_of
from baton.models.checkpoint import LEGACY_HASH_VERSIONS
from baton.secret_scan import ensure_no_secrets
from baton.store.base import SqlStore
from baton.store.core import Tx
from baton.store.blobs import BlobReader, Blobs
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


def encoded_record(record: Record) -> tuple[bytes, str]:
    """Canonical bytes and ref of a record (what `Record.canonical` and `Record.record_ref` give),
    remembered for the same (immutable) object.

    A run keeps most parts unchanged between checkpoints, and holds its observations from the moment
    it makes them: re-encoding them at every seal would cost more than everything else sealing does.
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


_MANIFESTS: dict[tuple[type[Record], tuple[str, ...]], Record] = {}


def _manifest(model: type[CandidateManifest] | type[EvidenceManifest], refs: tuple[str, ...]) -> Record:
    """The candidate or evidence manifest of `refs`: the same object while the refs do not change,
    so an unchanged manifest is not encoded again at every seal."""
    key = (model, refs)
    manifest = _MANIFESTS.get(key)
    if manifest is None:
        if len(_MANIFESTS) >= _ENCODED_LIMIT:
            _MANIFESTS.clear()
        field_name = "candidate_refs" if model is CandidateManifest else "evidence_refs"
        manifest = _MANIFESTS[key] = model.model_validate({field_name: refs})
    return manifest


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
        data, ref = encoded_record(record)
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
        candidate_manifest_ref=add("candidate manifest", _manifest(CandidateManifest, candidate_refs)),
        verifier_evidence_ref=add("evidence manifest", _manifest(EvidenceManifest, evidence_refs)),
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
    within: Callable[[Tx], None] | None = None,
    events: Sequence[Event] | Callable[[ExecutionCheckpoint], Sequence[Event]] = (),
    **build: Any,
) -> ExecutionCheckpoint:
    """Build a checkpoint and record it, making its new blobs durable with it.

    `contents` are raw bytes the new parts refer to (observation contents,
    artifacts). With the SQL blob backend of the same store, blobs and the
    checkpoint row commit in one transaction; with files, the blobs are made
    durable first, then the row is committed. `within` and `events` (a list, or
    a function of the built checkpoint) ride in the checkpoint's transaction
    (see `SqlStore.append_checkpoint`).
    """
    staged = StagedBlobs(blobs)
    checkpoint = build_checkpoint(staged, contents=contents, **build)
    listed = events(checkpoint) if callable(events) else events
    if isinstance(blobs, SqlBlobStore) and blobs.store is store:
        in_tx = blobs.for_transaction(staged.pending)  # large blobs (hybrid backend) are made durable first
        store.append_checkpoint(checkpoint, blobs=in_tx, within=within, events=listed)
        blobs.mark_stored(in_tx)
    else:
        blobs.put_many(staged.pending)
        store.append_checkpoint(checkpoint, within=within, events=listed)
    return checkpoint


class _Fetcher:
    """Collects the refs one level of a walk needs and fetches them in one batched read.

    `want` queues a ref (with what it is, for error messages); `run` fetches
    every queued ref with one `get_many` (verified against its hash);
    `record` parses a fetched ref. A missing part is reported when it is
    parsed, a corrupt one when it is fetched, each naming what it was, as
    `get_record` does.
    """

    def __init__(self, reader: BlobReader | Blobs) -> None:
        self.reader = reader
        self.fetched: dict[str, bytes] = {}
        self._queued: dict[str, str] = {}
        self._optional: set[str] = set()
        self._parsed: dict[tuple[str, type[Record]], Record] = {}

    def want(self, ref: str, what: str, *, optional: bool = False) -> None:
        if ref not in self.fetched and ref not in self._queued:
            self._queued[ref] = what
            if optional:
                self._optional.add(ref)

    def run(self) -> None:
        """Fetch every queued ref: one call of the backend (one query for SQL blobs)."""
        queued, self._queued = self._queued, {}
        if not queued:
            return
        get_many = getattr(self.reader, "get_many", None)
        if get_many is None:  # a minimal backend with `get` only
            for ref, what in queued.items():
                self._get_one(ref, what)
            return
        try:
            self.fetched.update(get_many(list(queued), missing_ok=True))
        except IntegrityError as exc:
            for ref, what in queued.items():  # name the corrupt part
                self._get_one(ref, what)
            raise CheckpointIntegrityError(f"a part of the checkpoint is corrupt: {exc}") from exc

    def prefetch_chain(self, head: str) -> None:
        """Take the observation segment chain ending at `head` in one query, where the backend can.

        Only verified bytes come back and they are parsed and checked like any
        others; whatever the backend could not follow is fetched by the walk.
        """
        chain = getattr(self.reader, "segment_chain", None)
        if chain is not None:
            for ref, data in chain(head).items():
                self.fetched.setdefault(ref, data)

    def _get_one(self, ref: str, what: str) -> None:
        try:
            self.fetched[ref] = self.reader.get(ref)
        except BlobNotFoundError:
            pass  # reported when parsed (or ignored, if optional)
        except IntegrityError as exc:
            raise CheckpointIntegrityError(f"{what} {ref} is corrupt: {exc}") from exc

    def record(self, ref: str, model: type[R], what: str) -> R:
        """The fetched `ref` parsed as `model` (parsed once per ref and model)."""
        parsed = self._parsed.get((ref, model))
        if parsed is None:
            data = self.fetched.get(ref)
            if data is None:
                raise CheckpointIntegrityError(f"{what} {ref} is missing from the blob store")
            parsed = self._parsed[(ref, model)] = model.from_canonical(data)
        return parsed  # type: ignore[return-value]


def _environment_ref(checkpoint: ExecutionCheckpoint, placement: Placement) -> str:
    """The environment id the placement has under the hashing `checkpoint` was sealed with."""
    if checkpoint.schema_version in LEGACY_HASH_VERSIONS:
        return legacy_ref_of(placement.environment.model_dump(mode="json"))
    return placement.environment.environment_id


def _reading(blobs: Blobs) -> AbstractContextManager[BlobReader | Blobs]:
    """The backend's reader for a walk of several fetches (one read transaction for SQL blobs)."""
    reading = getattr(blobs, "reading", None)
    return reading() if reading is not None else nullcontext(blobs)


def _observation_log(fetch: _Fetcher, manifest_ref: str) -> tuple[Observation, ...]:
    """Walk the segment chain, oldest observation first.

    Where the backend can follow the chain itself (PostgreSQL blobs), the
    segments come in one query and every observation in one more. Otherwise
    each fetch brings the segment before the current one together with the
    current one's observations (and whatever else the caller queued before
    the walk): one fetch per segment.
    """
    if manifest_ref not in fetch.fetched:
        fetch.prefetch_chain(manifest_ref)
    if manifest_ref not in fetch.fetched:
        fetch.want(manifest_ref, "observation segment")
        fetch.run()
    segments: list[ObservationSegment] = []
    ref: str | None = manifest_ref
    while ref is not None:
        segment = fetch.record(ref, ObservationSegment, "observation segment")
        segments.append(segment)
        for obs_ref in segment.observation_refs:
            fetch.want(obs_ref, "observation")
        ref = segment.previous
        if ref is not None and ref not in fetch.fetched:
            fetch.want(ref, "observation segment")
            fetch.run()
    fetch.run()  # the observations (and anything else) still queued
    observations = [
        fetch.record(obs_ref, Observation, "observation")
        for segment in reversed(segments)
        for obs_ref in segment.observation_refs
    ]
    if segments and len(observations) != segments[0].total:
        raise CheckpointIntegrityError(
            f"observation log {manifest_ref} claims {segments[0].total} entries but holds {len(observations)}"
        )
    return tuple(observations)


def load_observations(blobs: Blobs, manifest_ref: str) -> tuple[Observation, ...]:
    """Walk the observation segment chain, oldest first (every blob verified)."""
    with _reading(blobs) as reader:
        return _observation_log(_Fetcher(reader), manifest_ref)


def restore(blobs: Blobs, checkpoint: ExecutionCheckpoint, *, verify_artifact: bool = False) -> RestoredRun:
    """Fetch and verify every part of `checkpoint`.

    The release and placement refs are checked against the ids the checkpoint
    records, so a part swapped for another is caught. With `verify_artifact`,
    the current candidate's artifact bytes are fetched and re-hashed too when
    the blob store holds them (they may live elsewhere).

    Every blob is fetched and re-hashed, level by level: the parts and the
    newest observation segment together, then each older segment with the
    observations of the one after it (the candidates and evidence ride along
    with the first). With SQL blobs that is one query per level, all in one
    read transaction, rather than one transaction per blob.
    """
    with _reading(blobs) as reader:
        fetch = _Fetcher(reader)
        fetch.prefetch_chain(checkpoint.observation_manifest_ref)  # the whole log's segments, where one query can
        top = (
            (checkpoint.release_id, "behavioral release"),
            (checkpoint.placement_ref, "placement"),
            (checkpoint.candidate_manifest_ref, "candidate manifest"),
            (checkpoint.verifier_evidence_ref, "evidence manifest"),
            (checkpoint.task_state_ref, "run state"),
            (checkpoint.operation_ledger_ref, "operation ledger"),
            (checkpoint.authority_context_ref, "authority context"),
            (checkpoint.budget_ledger_ref, "budget ledger"),
            (checkpoint.workspace_snapshot_ref, "workspace identity"),
            (checkpoint.search_state_ref, "search state"),
        )
        for ref, what in top:
            if ref is not None:
                fetch.want(ref, what)
        fetch.want(checkpoint.observation_manifest_ref, "observation segment")  # unless prefetched
        fetch.run()
        release = fetch.record(checkpoint.release_id, BehavioralRelease, "behavioral release")
        placement = fetch.record(checkpoint.placement_ref, Placement, "placement")
        if _environment_ref(checkpoint, placement) != checkpoint.environment_id:
            raise CheckpointIntegrityError(
                f"checkpoint {checkpoint.checkpoint_id}: placement environment does not match environment_id"
            )
        candidates = fetch.record(checkpoint.candidate_manifest_ref, CandidateManifest, "candidate manifest")
        evidence = fetch.record(checkpoint.verifier_evidence_ref, EvidenceManifest, "evidence manifest")
        state = fetch.record(checkpoint.task_state_ref, PortableRunState, "run state")
        operations = fetch.record(checkpoint.operation_ledger_ref, OperationLedger, "operation ledger")
        authority = fetch.record(checkpoint.authority_context_ref, AuthorityContext, "authority context")
        budget = fetch.record(checkpoint.budget_ledger_ref, BudgetLedger, "budget ledger")
        for ref in candidates.candidate_refs:
            fetch.want(ref, "candidate")
        for ref in evidence.evidence_refs:
            fetch.want(ref, "verifier evidence")
        observations = _observation_log(fetch, checkpoint.observation_manifest_ref)
        parts = RunParts(
            run_kind=checkpoint.run_kind,
            release=release,
            placement=placement,
            state=state,
            operations=operations,
            authority=authority,
            budget=budget,
            candidates=tuple(fetch.record(ref, Candidate, "candidate") for ref in candidates.candidate_refs),
            evidence=tuple(
                fetch.record(ref, VerifierEvidence, "verifier evidence") for ref in evidence.evidence_refs
            ),
            constraints=checkpoint.constraints,
            workspace=None
            if checkpoint.workspace_snapshot_ref is None
            else fetch.record(checkpoint.workspace_snapshot_ref, WorkspaceIdentity, "workspace identity"),
            search=None
            if checkpoint.search_state_ref is None
            else fetch.record(checkpoint.search_state_ref, SearchState, "search state"),
        )
        if verify_artifact and parts.current_candidate is not None:
            fetch.want(parts.current_candidate.artifact_hash, "candidate artifact", optional=True)
            fetch.run()
    return RestoredRun(checkpoint=checkpoint, parts=parts, observations=observations)
