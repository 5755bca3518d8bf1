"""Real runs in a real Baton store for the platform tests.

`ResearchRun` launches a research run the way the fleet does (`launch_run`),
takes its lease as a worker would, and seals checkpoints with the same
CHECKPOINT_SEALED events the SDK's sealer appends. The report is drafted by the
release's scripted model from recorded documents and checked by the real
citation verifier, so a reverification can re-run that verifier on the bytes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from dataclasses import dataclass, field

from baton.catalog.releases import RELEASES
from baton.agents.scripted_models import model_for
from baton.agents.verifiers import verify_report
from baton.checkpoints import RunParts, restore, seal_checkpoint
from baton.models import (
    Boundary,
    BudgetUsage,
    Candidate,
    Event,
    EventType,
    ExecutionCheckpoint,
    Observation,
    Placement,
    ResumabilityClass,
    RunKind,
    VerifierEvidence,
)
from baton.models.authority import AuthorityLevel
from baton.ownership import Coordinator
from baton.placements import DEFAULT_PLACEMENTS
from baton.runtime import memory_keys as keys
from baton.runtime.launch import RunSpec, launch_run
from baton.store.base import SqlStore
from baton.store.blobs import Blobs

V7 = RELEASES["model-v7"]
PLACEMENTS: dict[str, Placement] = {p.name: p for p in DEFAULT_PLACEMENTS}
HOME_PLACEMENT = PLACEMENTS["local-gpu-eu"]
DOCS = (
    ("corpus://handbook/leases", b"A lease names one owner per epoch. Expiry follows the database clock."),
    ("corpus://handbook/fencing", b"Targets refuse fencing tokens below the highest seen. Stale owners stop."),
)


@dataclass
class ResearchRun:
    """A research run driven by the test as its worker."""

    store: SqlStore
    blobs: Blobs
    run_id: str
    owner: str
    epoch: int
    parts: RunParts
    head: ExecutionCheckpoint
    observations: list[Observation] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    drafts: int = 0

    @classmethod
    def launch(
        cls, store: SqlStore, blobs: Blobs, *, placement: Placement = HOME_PLACEMENT, run_id: str | None = None,
        lease_ttl_s: float = 60.0, freshness_s: float = 3600.0,
    ) -> ResearchRun:
        """Launch, adopt (a worker lease), record the documents and seal GENERATING."""
        run_id = run_id or f"run-{uuid.uuid4().hex[:8]}"
        spec = RunSpec(run_id, RunKind.RESEARCH, V7, placement, "research leases", {"topic": "leases"},
                       AuthorityLevel.SANDBOX_MUTATE)
        head, _ = launch_run(store, blobs, spec, reservation_ttl_s=lease_ttl_s)
        lease = Coordinator(store, name="test-worker").grant(run_id, "worker:test", ttl_s=lease_ttl_s, force=True)
        assert lease is not None
        restored = restore(blobs, head)
        run = cls(store, blobs, run_id, "worker:test", lease.epoch, restored.parts, head)
        now = store.db_now()
        run.observations = [
            Observation(source=source, query={"doc": source}, observed_at=now, content_ref=blobs.put(body),
                        freshness_budget_s=freshness_s)
            for source, body in DOCS
        ]
        run.seal(Boundary.GENERATING, new_observations=run.observations)
        return run

    def seal(self, boundary: Boundary, *, new_observations: list[Observation] | None = None,
             parts: RunParts | None = None) -> ExecutionCheckpoint:
        if parts is not None:
            self.parts = parts
        self.head = seal_checkpoint(
            self.store, self.blobs, run_id=self.run_id, parts=self.parts, new_observations=new_observations or (),
            parent=self.head, boundary=boundary, resumability=ResumabilityClass.R3,
            resumability_reasons=("recorded_observations",), owner_epoch=self.epoch, sealed_at=self.store.db_now(),
        )
        self.seqs.append(self.store.append_event(Event(
            event_type=EventType.CHECKPOINT_SEALED, run_id=self.run_id, at=self.store.db_now(),
            checkpoint_id=self.head.checkpoint_id, source_placement=self.parts.placement.name,
            source_epoch=self.epoch, release_id=self.parts.release.release_id, resume_boundary=boundary.value,
            detail={"checkpoint_hash": self.head.checkpoint_hash, "owner": self.owner},
        )))
        return self.head

    def draft(self, topic: str | None = None) -> Candidate:
        """A new report (a new artifact hash each time) sealed at CANDIDATE_READY."""
        self.drafts += 1
        inputs = [(obs, body) for obs, (_, body) in zip(self.observations, DOCS, strict=True)]
        reply = model_for(self.parts.release).draft_report(inputs, topic=topic or f"leases, draft {self.drafts}")
        candidate = Candidate(candidate_id=f"report-{self.drafts}", kind="report",
                              artifact_hash=self.blobs.put(reply.output), produced_by_release=self.parts.release.release_id,
                              created_at=self.store.db_now())
        memory = dict(self.parts.state.memory)
        recorded = dict(memory.get(keys.CANDIDATE_INPUTS) or {})  # type: ignore[arg-type]
        recorded[candidate.candidate_id] = [obs.record_ref() for obs in self.observations]
        memory[keys.CANDIDATE_INPUTS] = recorded
        self.parts = dataclasses.replace(
            self.parts, candidates=(*self.parts.candidates, candidate),
            state=self.parts.state.model_copy(update={"memory": memory}),
            budget=self.parts.budget.charge(reply.charge),
        )
        self.seal(Boundary.CANDIDATE_READY)
        return candidate

    def verify(self) -> VerifierEvidence:
        """Verify the current candidate's bytes and seal VERIFIED (what the SDK's `verify` does)."""
        candidate = self.parts.current_candidate
        assert candidate is not None
        verdict = verify_report(self.blobs.get(candidate.artifact_hash), [o.record_ref() for o in self.observations])
        evidence = VerifierEvidence(candidate_hash=candidate.artifact_hash, verifier_version=verdict.verifier_version,
                                    result=verdict.result, detail=verdict.detail, verified_at=self.store.db_now())
        self.parts = dataclasses.replace(self.parts, evidence=(*self.parts.evidence, evidence),
                                         budget=self.parts.budget.charge(BudgetUsage(model_calls=1)))
        self.seal(Boundary.VERIFIED if verdict.passed else Boundary.GENERATING)
        return evidence

    def finish(self, status: str = "verified") -> int:
        self.store.set_run_status(self.run_id, status)
        seq = self.store.append_event(Event(event_type=EventType.RUN_FINISHED, run_id=self.run_id,
                                            at=self.store.db_now(), reason=status))
        self.store.release_lease(self.run_id, self.owner, self.epoch)
        return seq


def newest_seq(store: SqlStore) -> int:
    """The seq of the newest event."""
    newest = 0
    while batch := store.list_events(after_seq=newest, limit=10_000):
        newest = batch[-1][0]
    return newest


def db_later(store: SqlStore, seconds: float) -> dt.datetime:
    return store.db_now() + dt.timedelta(seconds=seconds)
