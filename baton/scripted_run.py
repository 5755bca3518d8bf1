"""A scripted research run sealed through several semantic boundaries.

It exercises the foundation end to end: observations with content hashes,
derived facts kept apart from hypotheses, a candidate, verifier evidence bound
to its hash, budget charged along the way, and a checkpoint at each boundary.
`make demo` runs it, then loads every checkpoint back and verifies it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, replace
from decimal import Decimal

from baton.checkpoints import RunParts, build_checkpoint, put_record, restore
from baton.models import (
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    BudgetLimits,
    BudgetUsage,
    Candidate,
    DerivedFact,
    EnvironmentIdentity,
    Event,
    EventType,
    ExecutionCheckpoint,
    Observation,
    OperationLedger,
    Placement,
    PortableRunState,
    ResumabilityClass,
    RunKind,
    SourceAuthority,
    VerdictResult,
    VerifierEvidence,
)
from baton.store.blobs import BlobStore
from baton.store.base import SqlStore

DOCUMENTS = {
    "corpus://handbook/leases": b"A lease names one owner per epoch; expiry is judged by the database clock.",
    "corpus://handbook/fencing": b"Targets refuse fencing tokens lower than the highest they have seen.",
    "corpus://handbook/idempotency": b"One idempotency key yields one side effect, whatever the retries.",
}


def demo_release() -> BehavioralRelease:
    return BehavioralRelease(
        model="scripted-model-v7",
        prompt_bundle="research-prompts-18",
        router_policy="router-4",
        tool_contract="tools-9",
        memory_schema="memory-6",
        verifier_bundle="citations-12",
    )


def demo_placement() -> Placement:
    release = demo_release()
    return Placement(
        name="local-eu-1",
        region="eu-west",
        provider="local",
        authority_ceiling=AuthorityLevel.EXTERNAL_MUTATE,
        supported_release_ids=(release.release_id,),
        readable_schema_versions=("1", "2", "3"),
        verifiers=("citations-12",),
        tools=("tools-9",),
        environment=EnvironmentIdentity(
            placement="local-eu-1",
            region="eu-west",
            provider="local",
            runtime_image="python:3.11",
            tool_versions={"corpus-client": "1.0"},
        ),
    )


@dataclass(frozen=True)
class SealedStep:
    checkpoint: ExecutionCheckpoint
    observations: int
    verified_on_restore: bool


def _event(run_id: str, kind: EventType, at: dt.datetime, checkpoint: ExecutionCheckpoint | None, **detail: str) -> Event:
    return Event(
        event_type=kind,
        run_id=run_id,
        at=at,
        checkpoint_id=None if checkpoint is None else checkpoint.checkpoint_id,
        release_id=None if checkpoint is None else checkpoint.release_id,
        state_schema=None if checkpoint is None else checkpoint.schema_version,
        resume_boundary=None if checkpoint is None else checkpoint.boundary.value,
        detail=dict(detail),
    )


def run_scripted_research(store: SqlStore, blobs: BlobStore, *, run_id: str | None = None) -> list[SealedStep]:
    """Run the script, sealing a checkpoint at each boundary; return what was sealed and re-verified."""
    run_id = run_id or f"demo-{uuid.uuid4().hex[:8]}"
    now = dt.datetime.now(dt.timezone.utc)
    release, placement = demo_release(), demo_placement()
    store.create_run(run_id, RunKind.RESEARCH, release.release_id, placement.name, {"script": "research"})
    store.append_event(_event(run_id, EventType.RUN_CREATED, now, None))
    lease = store.acquire_lease(run_id, "demo-worker", 30.0, expected_epoch=0)
    if lease is None:
        raise RuntimeError(f"could not take the first lease of {run_id}")
    epoch = lease.epoch
    parts = RunParts(
        run_kind=RunKind.RESEARCH,
        release=release,
        placement=placement,
        state=PortableRunState(task="Summarize how Baton keeps side effects single", active_plan=("read", "draft", "verify")),
        operations=OperationLedger(),
        authority=AuthorityContext(level=AuthorityLevel.VERIFY, policy_id="demo-policy"),
        budget=BudgetLedger(
            limits=BudgetLimits(
                model_spend_usd=Decimal("2.00"),
                model_calls=20,
                search_expansions=10,
                tool_calls=20,
                browser_seconds=0,
                sandbox_seconds=60,
                verification_reserve_usd=Decimal("0.50"),
                retries=3,
                deadline=now + dt.timedelta(hours=1),
            )
        ),
    )
    parent: ExecutionCheckpoint | None = None
    sealed: list[SealedStep] = []
    observed = 0

    def seal(boundary: Boundary, resumability: ResumabilityClass, reason: str, new_obs: list[Observation]) -> None:
        nonlocal parent, observed
        at = dt.datetime.now(dt.timezone.utc)
        store.append_event(_event(run_id, EventType.CHECKPOINT_STARTED, at, parent))
        checkpoint = build_checkpoint(
            blobs,
            run_id=run_id,
            parts=parts,
            new_observations=new_obs,
            parent=parent,
            boundary=boundary,
            resumability=resumability,
            resumability_reasons=(reason,),
            owner_epoch=epoch,
            sealed_at=at,
        )
        store.append_checkpoint(checkpoint)
        store.append_event(_event(run_id, EventType.CHECKPOINT_SEALED, at, checkpoint))
        observed += len(new_obs)
        parent = checkpoint
        reloaded = store.get_checkpoint(checkpoint.checkpoint_id)
        restored = restore(blobs, reloaded)
        ok = reloaded == checkpoint and restored.parts.state == parts.state and len(restored.observations) == observed
        sealed.append(SealedStep(checkpoint=checkpoint, observations=observed, verified_on_restore=ok))

    observations = []
    for source, content in DOCUMENTS.items():
        observations.append(
            Observation(
                source=source,
                query={"path": source.removeprefix("corpus://")},
                observed_at=dt.datetime.now(dt.timezone.utc),
                content_ref=blobs.put(content),
                freshness_budget_s=3600,
                authority=SourceAuthority.AUTHORITATIVE,
            )
        )
    facts = tuple(
        DerivedFact(fact_id=f"f{i}", statement=content.decode().split(";")[0], derived_from=(obs.record_ref(),))
        for i, (obs, content) in enumerate(zip(observations, DOCUMENTS.values(), strict=True))
    )
    parts = _with(parts, state=parts.state.model_copy(update={"step": 1, "derived_facts": facts}),
                  budget=parts.budget.charge(BudgetUsage(tool_calls=3, model_calls=1, model_spend_usd=Decimal("0.02"))))
    seal(Boundary.GENERATING, ResumabilityClass.R3, "recorded observations can be reused", observations)

    report = "\n".join(f"- {fact.statement} [{fact.fact_id}]" for fact in facts).encode()
    candidate = Candidate(
        candidate_id="report-1",
        kind="report",
        artifact_hash=blobs.put(report),
        produced_by_release=release.release_id,
        summary="three-claim summary",
        created_at=dt.datetime.now(dt.timezone.utc),
    )
    parts = _with(
        parts,
        candidates=(candidate,),
        state=parts.state.model_copy(update={"step": 2, "candidate_refs": (put_record(blobs, candidate),)}),
        budget=parts.budget.charge(BudgetUsage(model_calls=1, model_spend_usd=Decimal("0.05"))),
    )
    seal(Boundary.CANDIDATE_READY, ResumabilityClass.R3, "candidate sealed by hash", [])

    cited = all(f"[{fact.fact_id}]" in report.decode() for fact in facts)
    evidence = VerifierEvidence(
        candidate_hash=candidate.artifact_hash,
        verifier_version="citations-12",
        inputs={"observations": [obs.record_ref() for obs in observations]},
        result=VerdictResult.PASS if cited else VerdictResult.FAIL,
        detail="every claim cites a recorded observation" if cited else "uncited claim",
        verified_at=dt.datetime.now(dt.timezone.utc),
    )
    parts = _with(
        parts,
        evidence=(evidence,),
        state=parts.state.model_copy(update={"step": 3}),
        budget=parts.budget.charge(BudgetUsage(verification_spend_usd=Decimal("0.01"))),
    )
    seal(Boundary.VERIFIED, ResumabilityClass.R3, "evidence bound to the candidate hash", [])
    store.set_run_status(run_id, "verified" if evidence.passed else "failed")
    store.append_event(_event(run_id, EventType.RUN_FINISHED, dt.datetime.now(dt.timezone.utc), parent))
    store.release_lease(run_id, "demo-worker", epoch)
    return sealed


def _with(parts: RunParts, **changes: object) -> RunParts:
    return replace(parts, **changes)  # type: ignore[arg-type]
