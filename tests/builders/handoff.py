"""A research run sealed up to a boundary by the reference agent's model and verifier, and the events it records."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from baton.agents.releases import RELEASES
from baton.agents.scripted_models import model_for
from baton.agents.verifiers import verify_report
from baton.authority import AuthorityService, Capability
from baton.checkpoints import RunParts, build_checkpoint
from baton.gateway import MutationRequest
from baton.models import (
    Approval,
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    Candidate,
    Event,
    EventType,
    ExecutionCheckpoint,
    Observation,
    OperationLedger,
    Placement,
    PortabilityConstraints,
    PortableRunState,
    ResumabilityClass,
    RunKind,
    VerdictResult,
    VerifierEvidence,
)
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.records import Lease

from builders.records import limits, placement

V7: BehavioralRelease = RELEASES["model-v7"]
V8: BehavioralRelease = RELEASES["model-v8"]
OPERATION = "publish"
DOCUMENTS = (
    ("corpus://handbook/leases", b"A lease names one owner per epoch. Expiry follows the database clock."),
    ("corpus://handbook/fencing", b"Targets refuse fencing tokens below the highest seen. Stale owners stop."),
)


def place(
    name: str,
    *,
    region: str = "eu-west",
    provider: str = "local",
    ceiling: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE,
    releases: Sequence[BehavioralRelease] = (V7, V8),
    schemas: Sequence[str] = ("1", "2", "3"),
    image: str = "worker:1",
    verifiers: Sequence[str] | None = None,
) -> Placement:
    """A placement able to run the catalog releases (unless told otherwise)."""
    return placement(
        name, region=region, provider=provider, ceiling=ceiling, releases=releases, schemas=schemas, image=image,
        verifiers=(V7.verifier_bundle,) if verifiers is None else verifiers, tools=(V7.tool_contract,), tool_versions={},
    )


SOURCE = place("eu-a")
PEER = place("eu-b")


@dataclass
class SeededRun:
    """A research run sealed up to some boundary, held by `owner` at `lease.epoch` on `placement`."""

    store: SqlStore
    blobs: BlobStore
    run_id: str
    owner: str
    lease: Lease
    placement: Placement
    parts: RunParts
    observations: list[Observation]
    checkpoints: list[ExecutionCheckpoint] = field(default_factory=list)

    @property
    def latest(self) -> ExecutionCheckpoint:
        return self.checkpoints[-1]

    @property
    def candidate(self) -> Candidate:
        assert self.parts.current_candidate is not None
        return self.parts.current_candidate

    def seal(
        self,
        boundary: Boundary,
        *,
        parts: RunParts | None = None,
        new_observations: Sequence[Observation] = (),
        epoch: int | None = None,
        resumability: ResumabilityClass = ResumabilityClass.R3,
    ) -> ExecutionCheckpoint:
        """Seal and record the next checkpoint (at the holder's epoch unless told otherwise)."""
        if parts is not None:
            self.parts = parts
        checkpoint = build_checkpoint(
            self.blobs, run_id=self.run_id, parts=self.parts, new_observations=new_observations,
            parent=self.checkpoints[-1] if self.checkpoints else None, boundary=boundary,
            resumability=resumability, resumability_reasons=("recorded_observations",),
            owner_epoch=self.lease.epoch if epoch is None else epoch, sealed_at=self.store.db_now(),
        )
        self.store.append_checkpoint(checkpoint)
        self.checkpoints.append(checkpoint)
        return checkpoint

    def capability(self, authority: AuthorityService, *, placement: Placement | None = None) -> Capability:
        """A publish capability for the current candidate, issued from policy for the lease holder."""
        return authority.issue(
            run_id=self.run_id, epoch=self.lease.epoch, operation=OPERATION, artifact_hash=self.candidate.artifact_hash,
            level=AuthorityLevel.EXTERNAL_MUTATE, lease=self.store.get_lease(self.run_id),
            placement=placement or self.placement, context=self.parts.authority, now=self.store.db_now(),
        )

    def publish_request(self, capability: Capability | str, *, epoch: int | None = None, key: str = "publish-1") -> MutationRequest:
        return MutationRequest(
            run_id=self.run_id, epoch=self.lease.epoch if epoch is None else epoch, operation=OPERATION,
            idempotency_key=f"{self.run_id}:{key}", target="publisher",
            payload={"intent": "publish", "candidate_hash": self.candidate.artifact_hash},
            artifact_hash=self.candidate.artifact_hash,
            capability=capability if isinstance(capability, str) else capability.token, process=self.owner,
        )


def seed_run(
    store: SqlStore,
    blobs: BlobStore,
    *,
    placement: Placement = SOURCE,
    boundary: Boundary = Boundary.AUTHORIZED,
    release: BehavioralRelease = V7,
    authority: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE,
    freshness_s: float = 3600.0,
    observed_ago_s: float = 0.0,
    approval_valid_s: float = 3600.0,
    deadline_s: float = 3600.0,
    constraints: PortabilityConstraints | None = None,
    owner: str = "source-worker",
    ttl_s: float = 60.0,
) -> SeededRun:
    """Create a research run and seal it through GENERATING, CANDIDATE_READY, ... up to `boundary`."""
    run_id = f"run-{uuid.uuid4().hex[:10]}"
    store.create_run(run_id, RunKind.RESEARCH, release.release_id, placement.name)
    lease = Coordinator(store, name="test-scheduler").grant(run_id, owner, ttl_s=ttl_s)
    assert lease is not None
    now = store.db_now()
    observations = [
        Observation(source=source, query={"doc": source}, observed_at=now - dt.timedelta(seconds=observed_ago_s),
                    content_ref=blobs.put(body), freshness_budget_s=freshness_s)
        for source, body in DOCUMENTS
    ]
    parts = RunParts(
        run_kind=RunKind.RESEARCH, release=release, placement=placement,
        state=PortableRunState(task="summarise the handbook", active_plan=("read", "draft", "verify", "publish")),
        operations=OperationLedger(),
        authority=AuthorityContext(level=authority, policy_id="policy-1"),
        budget=BudgetLedger(limits=limits(now, deadline_s=deadline_s, model_calls=50)),
        constraints=constraints or PortabilityConstraints(),
    )
    seeded = SeededRun(store, blobs, run_id, owner, lease, placement, parts, observations)
    seeded.seal(Boundary.GENERATING, new_observations=observations)
    order = [Boundary.CANDIDATE_READY, Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY, Boundary.AUTHORIZED]
    if boundary is Boundary.GENERATING:
        return seeded
    reply = model_for(release).draft_report(list(zip(observations, (body for _, body in DOCUMENTS), strict=True)))
    candidate = Candidate(candidate_id="report-1", kind="report", artifact_hash=blobs.put(reply.output),
                          produced_by_release=release.release_id, created_at=now)
    seeded.parts = dataclasses.replace(seeded.parts, candidates=(candidate,), budget=seeded.parts.budget.charge(reply.charge))
    for step in order:
        if step is Boundary.VERIFIED:
            verdict = verify_report(reply.output, [o.record_ref() for o in observations])
            assert verdict.passed
            evidence = VerifierEvidence(candidate_hash=candidate.artifact_hash, verifier_version=verdict.verifier_version,
                                        result=VerdictResult.PASS, detail=verdict.detail, verified_at=now)
            seeded.parts = dataclasses.replace(seeded.parts, evidence=(evidence,))
        if step is Boundary.AUTHORIZED:
            approval = Approval(approval_id="appr-1", operation=OPERATION, artifact_hash=candidate.artifact_hash,
                                level=AuthorityLevel.EXTERNAL_MUTATE, approved_by="editor",
                                expires_at=store.db_now() + dt.timedelta(seconds=approval_valid_s))
            seeded.parts = dataclasses.replace(
                seeded.parts, authority=seeded.parts.authority.model_copy(update={"approvals": (approval,)}))
        seeded.seal(step)
        if step is boundary:
            break
    return seeded


def events(store: SqlStore, run_id: str, *types: EventType) -> list[Event]:
    """The run's events (of the given types, if any), oldest first."""
    return [event for _, event in store.list_events(run_id=run_id, event_types=list(types) or None)]


def one(store: SqlStore, run_id: str, event_type: EventType) -> Event:
    found = events(store, run_id, event_type)
    assert len(found) == 1, f"expected one {event_type.value}, found {len(found)}"
    return found[0]
