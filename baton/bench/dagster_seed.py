"""Fill a Baton store with many real research runs, quickly, for `baton bench dagster`.

Every run goes through the same calls a worker makes: `launch_run`, a worker
lease, sealed checkpoints with their CHECKPOINT_SEALED events, a report drafted
by the release's scripted model from recorded documents, the citation verifier
on its bytes, and RUN_FINISHED for the runs that end. Nothing is written
behind the store's back; the only shortcut is that the recorded documents are
few, so their blobs are shared (deduplicated) between runs, as a real corpus's
would be.

The mix (`SeedPlan`) makes the sensors' inputs realistic: most runs finished,
some active with a live lease, a few active with a lapsed one (a lost worker).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from baton.agents.scripted_models import model_for
from baton.agents.verifiers import verify_report
from baton.catalog.releases import RELEASES
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

RELEASE = RELEASES["model-v7"]
WORKER = "worker:bench"
DOCS: tuple[tuple[str, bytes], ...] = (
    ("corpus://handbook/leases", b"A lease names one owner per epoch. Expiry follows the database clock."),
    ("corpus://handbook/fencing", b"Targets refuse fencing tokens below the highest seen. Stale owners stop."),
    ("corpus://handbook/evidence", b"Evidence binds to one candidate hash. A new candidate needs new evidence."),
)


@dataclass(frozen=True)
class SeedPlan:
    """How many runs, and which share of them is active, and with a lapsed lease."""

    runs: int
    active_share: float = 0.1
    lapsed_share: float = 0.01
    prefix: str = "bench"

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"a seed plan needs at least one run, got {self.runs}")
        if not (0.0 <= self.lapsed_share <= self.active_share <= 1.0):
            raise ValueError("need 0 <= lapsed_share <= active_share <= 1")

    def kind_of(self, index: int) -> str:
        """'lapsed', 'active' or 'finished' for run `index`, spread evenly over the sequence."""
        lapsed_every = round(1 / self.lapsed_share) if self.lapsed_share else 0
        active_every = round(1 / self.active_share) if self.active_share else 0
        if lapsed_every and index % lapsed_every == lapsed_every - 1:
            return "lapsed"
        if active_every and index % active_every == 0:
            return "active"
        return "finished"

    def run_id(self, index: int) -> str:
        return f"{self.prefix}-{index:06d}"


@dataclass(frozen=True)
class SeededRun:
    run_id: str
    kind: str
    head: ExecutionCheckpoint
    epoch: int


def seed_placements() -> list[Placement]:
    """The placements that offer the seed release and allow its authority."""
    return [p for p in DEFAULT_PLACEMENTS if p.authority_ceiling.allows(AuthorityLevel.SANDBOX_MUTATE)
            and RELEASE.release_id in p.supported_release_ids]


class WorkerRun:
    """One research run driven by the seeder as its worker (launched, or resumed from its newest checkpoint)."""

    def __init__(self, store: SqlStore, blobs: Blobs, run_id: str, placement: Placement, lease_ttl_s: float) -> None:
        self.store, self.blobs, self.run_id = store, blobs, run_id
        spec = RunSpec(run_id, RunKind.RESEARCH, RELEASE, placement, "research leases", {"topic": "leases"},
                       AuthorityLevel.SANDBOX_MUTATE)
        self.head, _ = launch_run(store, blobs, spec, reservation_ttl_s=lease_ttl_s)
        lease = Coordinator(store, name="bench-seed").grant(run_id, WORKER, ttl_s=lease_ttl_s, force=True)
        if lease is None:
            raise RuntimeError(f"could not adopt seeded run {run_id}")
        self.epoch = lease.epoch
        self.parts: RunParts = restore(blobs, self.head).parts
        now = store.db_now()
        self.observations = [
            Observation(source=source, query={"doc": source, "run": run_id}, observed_at=now,
                        content_ref=blobs.put(body), freshness_budget_s=3600.0)
            for source, body in DOCS
        ]
        self.seal(Boundary.GENERATING, self.observations)

    @classmethod
    def resume(cls, store: SqlStore, blobs: Blobs, run_id: str) -> WorkerRun:
        """The seeded run `run_id` at its newest checkpoint, driven on at the same epoch."""
        head = store.latest_checkpoint(run_id)
        if head is None:
            raise ValueError(f"run {run_id} has no checkpoint")
        run = cls.__new__(cls)
        run.store, run.blobs, run.run_id = store, blobs, run_id
        run.head, run.epoch = head, head.owner_epoch
        restored = restore(blobs, head)
        run.parts, run.observations = restored.parts, list(restored.observations)
        return run

    def seal(self, boundary: Boundary, new_observations: list[Observation] | None = None) -> None:
        self.head = seal_checkpoint(
            self.store, self.blobs, run_id=self.run_id, parts=self.parts, new_observations=new_observations or (),
            parent=self.head, boundary=boundary, resumability=ResumabilityClass.R3,
            resumability_reasons=("recorded_observations",), owner_epoch=self.epoch, sealed_at=self.store.db_now(),
        )
        self.store.append_event(Event(
            event_type=EventType.CHECKPOINT_SEALED, run_id=self.run_id, at=self.store.db_now(),
            checkpoint_id=self.head.checkpoint_id, source_placement=self.parts.placement.name,
            source_epoch=self.epoch, release_id=self.parts.release.release_id, resume_boundary=boundary.value,
            detail={"checkpoint_hash": self.head.checkpoint_hash, "owner": WORKER},
        ))

    def draft(self, number: int) -> None:
        inputs = [(obs, body) for obs, (_, body) in zip(self.observations, DOCS, strict=True)]
        reply = model_for(self.parts.release).draft_report(inputs, topic=f"leases for {self.run_id}, draft {number}")
        candidate = Candidate(candidate_id=f"report-{number}", kind="report", artifact_hash=self.blobs.put(reply.output),
                              produced_by_release=self.parts.release.release_id, created_at=self.store.db_now())
        memory = dict(self.parts.state.memory)
        recorded = dict(memory.get(keys.CANDIDATE_INPUTS) or {})  # type: ignore[arg-type]
        recorded[candidate.candidate_id] = [obs.record_ref() for obs in self.observations]
        memory[keys.CANDIDATE_INPUTS] = recorded
        self.parts = dataclasses.replace(
            self.parts, candidates=(*self.parts.candidates, candidate),
            state=self.parts.state.model_copy(update={"memory": memory}), budget=self.parts.budget.charge(reply.charge),
        )
        self.seal(Boundary.CANDIDATE_READY)

    def verify(self) -> bool:
        candidate = self.parts.current_candidate
        assert candidate is not None
        verdict = verify_report(self.blobs.get(candidate.artifact_hash), [o.record_ref() for o in self.observations])
        evidence = VerifierEvidence(candidate_hash=candidate.artifact_hash, verifier_version=verdict.verifier_version,
                                    result=verdict.result, detail=verdict.detail, verified_at=self.store.db_now())
        self.parts = dataclasses.replace(self.parts, evidence=(*self.parts.evidence, evidence),
                                         budget=self.parts.budget.charge(BudgetUsage(model_calls=1)))
        self.seal(Boundary.VERIFIED if verdict.passed else Boundary.GENERATING)
        return verdict.passed

    def forge_evidence(self, candidate_hash: str) -> None:
        """Break the run on purpose: seal evidence that names another candidate hash (the check must fail)."""
        forged = self.parts.evidence[-1].model_copy(update={"candidate_hash": candidate_hash})
        self.parts = dataclasses.replace(self.parts, evidence=(*self.parts.evidence, forged))
        self.seal(self.head.boundary)

    def finish(self, status: str) -> None:
        self.store.set_run_status(self.run_id, status)
        self.store.append_event(Event(event_type=EventType.RUN_FINISHED, run_id=self.run_id,
                                      at=self.store.db_now(), reason=status))
        self.store.release_lease(self.run_id, WORKER, self.epoch)


def seed_run(store: SqlStore, blobs: Blobs, plan: SeedPlan, index: int) -> SeededRun:
    """Run `index` of `plan`: launched, adopted, drafted and verified; finished, or left active."""
    kind = plan.kind_of(index)
    placements = seed_placements()
    ttl = 0.05 if kind == "lapsed" else 24 * 3600.0
    run = WorkerRun(store, blobs, plan.run_id(index), placements[index % len(placements)], ttl)
    run.draft(1)
    passed = run.verify()
    if kind == "finished":
        run.finish("verified" if passed else "failed")
    return SeededRun(run.run_id, kind, run.head, run.epoch)


def seed(store: SqlStore, blobs: Blobs, plan: SeedPlan, *, start: int = 0,
         progress: Callable[[int], None] | None = None) -> list[SeededRun]:
    """Seed runs `start` .. `plan.runs - 1`; `progress(i)` after each."""
    seeded = []
    for index in range(start, plan.runs):
        seeded.append(seed_run(store, blobs, plan, index))
        if progress is not None:
            progress(index)
    return seeded


def add_draft(store: SqlStore, blobs: Blobs, run_id: str, number: int) -> ExecutionCheckpoint:
    """A new candidate for an active seeded run (its verifier evidence no longer binds)."""
    run = WorkerRun.resume(store, blobs, run_id)
    run.draft(number)
    return run.head
