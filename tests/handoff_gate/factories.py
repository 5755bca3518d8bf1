"""Builders of valid runs, placements and checkpoints for the handoff-gate tests."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

from baton.checkpoints import RunParts, build_checkpoint
from baton.identity import sha256_ref
from baton.models import (
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    BudgetLimits,
    Candidate,
    EnvironmentIdentity,
    ExecutionCheckpoint,
    Observation,
    OperationEntry,
    OperationLedger,
    OperationState,
    Placement,
    PortabilityConstraints,
    PortableRunState,
    ResumabilityClass,
    RunKind,
    VerdictResult,
    VerifierEvidence,
    WorkspaceIdentity,
)
from baton.schema_versions import V1_RUN_KIND_KEY, ExecutionCheckpointV1
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
TOOL_CONTRACT = "tool-contract-9"
VERIFIER_BUNDLE = "verifier-bundle-12"


def release(model: str = "model-v7", *, tool_contract: str = TOOL_CONTRACT, verifier: str = VERIFIER_BUNDLE) -> BehavioralRelease:
    return BehavioralRelease(
        model=model,
        prompt_bundle="prompt-bundle-18",
        router_policy="router-policy-4",
        tool_contract=tool_contract,
        memory_schema="memory-schema-6",
        verifier_bundle=verifier,
    )


def placement(
    name: str = "eu-1",
    *,
    region: str = "eu-west",
    provider: str = "local",
    ceiling: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE,
    releases: Sequence[BehavioralRelease] | None = None,
    schemas: Sequence[str] = ("3",),
    verifiers: Sequence[str] = (VERIFIER_BUNDLE,),
    tools: Sequence[str] = (TOOL_CONTRACT,),
    data_scopes: Sequence[str] = (),
    attested: bool = False,
    image: str = "worker:1",
    tool_versions: dict[str, str] | None = None,
) -> Placement:
    supported = (release(),) if releases is None else tuple(releases)
    return Placement(
        name=name,
        region=region,
        provider=provider,
        authority_ceiling=ceiling,
        supported_release_ids=tuple(r.release_id for r in supported),
        readable_schema_versions=tuple(schemas),
        data_scopes=tuple(data_scopes),
        verifiers=tuple(verifiers),
        tools=tuple(tools),
        hardware_attested=attested,
        environment=EnvironmentIdentity(
            placement=name,
            region=region,
            provider=provider,
            runtime_image=image,
            tool_versions={"pytest": "8.0"} if tool_versions is None else tool_versions,
        ),
    )


def budget() -> BudgetLedger:
    return BudgetLedger(
        limits=BudgetLimits(
            model_spend_usd=Decimal("5"),
            model_calls=100,
            search_expansions=50,
            tool_calls=100,
            browser_seconds=600,
            sandbox_seconds=600,
            verification_reserve_usd=Decimal("1"),
            retries=3,
            deadline=T0 + dt.timedelta(hours=2),
        )
    )


def workspace(base: str = "a1b2c3d") -> WorkspaceIdentity:
    return WorkspaceIdentity(
        repository_url="file:///repos/demo",
        base_commit=base,
        worktree_ref=sha256_ref(f"worktree at {base}".encode()),
        patch_ref=sha256_ref(b"patch P"),
        test_commands=("pytest -q",),
        verification_output_refs=(sha256_ref(b"pytest output"),),
    )


def operation(state: OperationState, op_id: str = "op-1") -> OperationEntry:
    return OperationEntry(
        operation_id=op_id,
        run_id="run-1",
        idempotency_key=f"key-{op_id}",
        epoch=1,
        kind="deploy",
        target="deploy-service",
        payload_ref=sha256_ref(f"payload {op_id}".encode()),
        state=state,
        recorded_at=T0,
    )


def ledger(*states: OperationState) -> OperationLedger:
    return OperationLedger(entries=tuple(operation(s, f"op-{i}") for i, s in enumerate(states)))


def parts(
    *,
    run_kind: RunKind = RunKind.RESEARCH,
    authority: AuthorityLevel = AuthorityLevel.VERIFY,
    where: Placement | None = None,
    constraints: PortabilityConstraints | None = None,
    operations: OperationLedger | None = None,
    ws: WorkspaceIdentity | None = None,
    step: int = 0,
    task: str = "summarise the corpus",
) -> RunParts:
    return RunParts(
        run_kind=run_kind,
        release=release(),
        placement=placement() if where is None else where,
        state=PortableRunState(task=task, step=step, memory={V1_RUN_KIND_KEY: run_kind.value}),
        operations=OperationLedger() if operations is None else operations,
        authority=AuthorityContext(level=authority, policy_id="policy-1"),
        budget=budget(),
        constraints=PortabilityConstraints() if constraints is None else constraints,
        workspace=ws,
    )


def observation(blobs: BlobStore, step: int) -> Observation:
    content = blobs.put(f"document body {step}".encode())
    return Observation(source=f"corpus://doc/{step}", observed_at=T0, content_ref=content, freshness_budget_s=600)


def seal(
    blobs: BlobStore,
    run_parts: RunParts,
    *,
    run_id: str = "run-1",
    parent: ExecutionCheckpoint | None = None,
    boundary: Boundary = Boundary.GENERATING,
    resumability: ResumabilityClass = ResumabilityClass.R3,
    observations: Sequence[Observation] = (),
) -> ExecutionCheckpoint:
    return build_checkpoint(
        blobs,
        run_id=run_id,
        parts=run_parts,
        new_observations=observations,
        parent=parent,
        boundary=boundary,
        resumability=resumability,
        resumability_reasons=("recorded_observations",),
        owner_epoch=1,
        sealed_at=T0,
    )


def chain(blobs: BlobStore, steps: int = 3, *, run_id: str = "run-1", base: RunParts | None = None) -> list[ExecutionCheckpoint]:
    """A run sealed `steps` times: observations each step, then a candidate with passing evidence."""
    current = parts() if base is None else base
    checkpoints: list[ExecutionCheckpoint] = []
    for step in range(steps):
        current = dataclasses.replace(current, state=current.state.model_copy(update={"step": step}))
        boundary = Boundary.GENERATING
        if step == steps - 1:
            artifact = blobs.put(b"report body")
            candidate = Candidate(
                candidate_id="c-1",
                kind="report",
                artifact_hash=artifact,
                produced_by_release=current.release.release_id,
                created_at=T0,
            )
            evidence = VerifierEvidence(
                candidate_hash=artifact, verifier_version=VERIFIER_BUNDLE, result=VerdictResult.PASS, verified_at=T0
            )
            current = dataclasses.replace(current, candidates=(candidate,), evidence=(evidence,))
            boundary = Boundary.VERIFIED
        checkpoints.append(
            seal(
                blobs,
                current,
                run_id=run_id,
                parent=checkpoints[-1] if checkpoints else None,
                boundary=boundary,
                observations=[observation(blobs, step)],
            )
        )
    return checkpoints


def seed_run(store: SqlStore, blobs: BlobStore, steps: int = 3, *, run_id: str = "run-1", base: RunParts | None = None) -> list[ExecutionCheckpoint]:
    """Create a run in `store` and append a sealed chain of `steps` checkpoints."""
    checkpoints = chain(blobs, steps, run_id=run_id, base=base)
    first = checkpoints[0]
    store.create_run(run_id, first.run_kind, first.release_id, "eu-1")
    for checkpoint in checkpoints:
        store.append_checkpoint(checkpoint)
    return checkpoints


def as_v1(checkpoint: ExecutionCheckpoint, parent: ExecutionCheckpointV1 | None = None) -> ExecutionCheckpointV1:
    """The v1 form a legacy writer would have sealed for the same state (run kind lives in task state)."""
    body = checkpoint.model_dump()
    for dropped in ("schema_version", "run_kind", "constraints", "resumability_reasons", "migrated_from_hash", "migration_ref", "checkpoint_hash"):
        body.pop(dropped)
    body["budget_ref"] = body.pop("budget_ledger_ref")
    body["parent_checkpoint_hash"] = None if parent is None else parent.checkpoint_hash
    return ExecutionCheckpointV1.seal(**body)


def v1_chain(blobs: BlobStore, steps: int = 3) -> list[ExecutionCheckpointV1]:
    legacy: list[ExecutionCheckpointV1] = []
    for checkpoint in chain(blobs, steps):
        legacy.append(as_v1(checkpoint, legacy[-1] if legacy else None))
    return legacy
