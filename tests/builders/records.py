"""Valid records with sensible defaults: releases, placements, budgets, run parts, observations, operations."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from baton.checkpoints import RunParts
from baton.identity import sha256_ref
from baton.models import (
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    BudgetLedger,
    BudgetLimits,
    EnvironmentIdentity,
    Observation,
    OperationEntry,
    OperationLedger,
    OperationState,
    Placement,
    PortabilityConstraints,
    PortableRunState,
    RunKind,
    WorkspaceIdentity,
)
from baton.schema_versions import V1_RUN_KIND_KEY

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
    """A placement able to run `releases` (default: `release()`)."""
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


def limits(start: dt.datetime = T0, *, deadline_s: float = 3600.0, **overrides: Any) -> BudgetLimits:
    """Budget limits with a deadline `deadline_s` after `start`; keyword arguments replace single limits."""
    values: dict[str, Any] = dict(
        model_spend_usd=Decimal("5"), model_calls=10, search_expansions=10, tool_calls=50, browser_seconds=0,
        sandbox_seconds=60, verification_reserve_usd=Decimal("1"), retries=3,
        deadline=start + dt.timedelta(seconds=deadline_s),
    )
    return BudgetLimits(**{**values, **overrides})


def budget() -> BudgetLedger:
    return BudgetLedger(limits=limits())


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
    task: str = "summarise the corpus",
    *,
    run_kind: RunKind = RunKind.RESEARCH,
    authority: AuthorityLevel = AuthorityLevel.VERIFY,
    where: Placement | None = None,
    constraints: PortabilityConstraints | None = None,
    operations: OperationLedger | None = None,
    ws: WorkspaceIdentity | None = None,
    step: int = 0,
) -> RunParts:
    """The parts of a run before its first checkpoint (no observations, candidates or evidence yet)."""
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


def observation(content_ref: str, source: str = "corpus://a", at: dt.datetime = T0, *, freshness_s: float = 60) -> Observation:
    return Observation(source=source, observed_at=at, content_ref=content_ref, freshness_budget_s=freshness_s)
