"""Runs recorded the way the SDK records them: task and candidate inputs in memory, one checkpoint per boundary."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from baton.agents.scripted_models import BuildInfo, model_for
from baton.agents.verifiers import check_deployment_spec, verify_report
from baton.checkpoints import RunParts, build_checkpoint
from baton.identity import canonical_json, ref_of, sha256_ref
from baton.models import (
    Approval,
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    Candidate,
    ExecutionCheckpoint,
    Observation,
    OperationEntry,
    OperationLedger,
    OperationState,
    PortableRunState,
    ResumabilityClass,
    RunKind,
    VerifierEvidence,
)
from baton.store.base import SqlStore
from baton.store.blobs import Blobs

from builders.handoff import V7, V8, place
from builders.records import limits

T0 = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.timezone.utc)
DOCS = {
    "lease": b"A lease names one owner per epoch. Expiry follows the database clock.",
    "fence": b"Targets refuse fencing tokens below the highest seen. Stale owners cannot act.",
    "idem": b"One idempotency key yields one side effect. Retries replay the recorded outcome.",
}
BUILDS = [
    BuildInfo(version="1.4.2", artifact_hash=sha256_ref(b"checkout@1.4.2"), canary_passed=True),
    BuildInfo(version="1.5.0-rc.1", artifact_hash=sha256_ref(b"checkout@1.5.0-rc.1"), canary_passed=True),
    BuildInfo(version="1.5.0", artifact_hash=sha256_ref(b"checkout@1.5.0"), canary_passed=False),
]
PLACEMENT = place("local-eu", schemas=("3",), image="w:1")


def _at(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def record_run(
    store: SqlStore,
    blobs: Blobs,
    run_id: str,
    *,
    kind: str = "report",
    release: BehavioralRelease = V7,
    drafted_by: BehavioralRelease | None = None,
) -> list[ExecutionCheckpoint]:
    """A finished run (GENERATING .. POSTCONDITION_VERIFIED) under `release`.

    `drafted_by` makes another release's model write the candidate while the
    checkpoints still name `release` (a run whose record lies about its release).
    """
    run_kind = RunKind.RESEARCH if kind == "report" else RunKind.DEPLOY
    task: dict[str, Any] = {"topic": "ownership", "documents": sorted(DOCS)} if kind == "report" else {"service": "checkout"}
    store.create_run(run_id, run_kind, release.release_id, PLACEMENT.name)
    if kind == "report":
        inputs = [(Observation(source=f"corpus://{name}", query={"doc_id": name}, observed_at=_at(0),
                               content_ref=blobs.put(body), freshness_budget_s=86400), body)
                  for name, body in sorted(DOCS.items())]
    else:
        content = canonical_json([b.model_dump(mode="json") for b in BUILDS])
        inputs = [(Observation(source="builds://checkout", query={"service": "checkout"}, observed_at=_at(0),
                               content_ref=blobs.put(content), freshness_budget_s=86400), content)]
    refs = [o.record_ref() for o, _ in inputs]
    parts = RunParts(
        run_kind=run_kind, release=release, placement=PLACEMENT,
        state=PortableRunState(task="replay test", memory={"task": task}), operations=OperationLedger(),
        authority=AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="p"),
        budget=BudgetLedger(limits=limits(T0, deadline_s=600 * 60, model_calls=9, search_expansions=0, tool_calls=9,
                                          sandbox_seconds=0, retries=2)),
    )
    chain: list[ExecutionCheckpoint] = []

    def seal(boundary: Boundary, minute: int, observations=()) -> None:
        chain.append(build_checkpoint(blobs, run_id=run_id, parts=parts, new_observations=observations,
                                      parent=chain[-1] if chain else None, boundary=boundary,
                                      resumability=ResumabilityClass.R3, resumability_reasons=("recorded",),
                                      owner_epoch=1, sealed_at=_at(minute)))
        store.append_checkpoint(chain[-1])

    seal(Boundary.GENERATING, 1, [o for o, _ in inputs])
    model = model_for(drafted_by or release)
    if kind == "report":
        reply = model.draft_report(inputs, topic=task["topic"])
    else:
        reply = model.plan_deployment("checkout", BUILDS)
    candidate = Candidate(candidate_id=f"{kind}-1", kind=kind, artifact_hash=blobs.put(reply.output),
                          produced_by_release=release.release_id, created_at=_at(2))
    memory = {**parts.state.memory, "baton.candidate_inputs": {candidate.candidate_id: refs}}
    parts = dataclasses.replace(parts, candidates=(candidate,), budget=parts.budget.charge(reply.charge),
                                state=parts.state.model_copy(update={"memory": memory}))
    seal(Boundary.CANDIDATE_READY, 2)
    verdict = verify_report(reply.output, refs) if kind == "report" else check_deployment_spec(reply.output, BUILDS)
    evidence = VerifierEvidence(candidate_hash=candidate.artifact_hash, verifier_version=verdict.verifier_version,
                                result=verdict.result, detail=verdict.detail, verified_at=_at(3))
    parts = dataclasses.replace(parts, evidence=(evidence,))
    seal(Boundary.VERIFIED, 3)
    approval = Approval(approval_id="a-1", operation="publish", artifact_hash=candidate.artifact_hash,
                        level=AuthorityLevel.EXTERNAL_MUTATE, approved_by="editor", expires_at=_at(120))
    parts = dataclasses.replace(parts, authority=parts.authority.model_copy(update={"approvals": (approval,)}))
    seal(Boundary.AUTHORIZED, 4)
    entry = OperationEntry(operation_id="op-1", run_id=run_id, idempotency_key=f"{run_id}:publish", epoch=1,
                           kind="publish", target="corpus", payload_ref=ref_of({"report": candidate.artifact_hash}),
                           artifact_hash=candidate.artifact_hash, state=OperationState.PREPARED, recorded_at=_at(5))
    parts = dataclasses.replace(parts, operations=OperationLedger(entries=(entry,)))
    seal(Boundary.COMMITTING, 5)
    parts = dataclasses.replace(parts, operations=OperationLedger(entries=(entry.model_copy(
        update={"state": OperationState.COMMITTED}),)))
    seal(Boundary.COMMITTED, 6)
    seal(Boundary.POSTCONDITION_VERIFIED, 7)
    return chain
