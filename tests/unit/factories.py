"""Small builders of valid records for unit tests."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from baton.checkpoints import RunParts
from baton.models import (
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    BudgetLedger,
    BudgetLimits,
    EnvironmentIdentity,
    Observation,
    OperationLedger,
    Placement,
    PortableRunState,
    RunKind,
)

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)


def release(model: str = "m-v7") -> BehavioralRelease:
    return BehavioralRelease(
        model=model, prompt_bundle="p18", router_policy="r4", tool_contract="t9", memory_schema="m6", verifier_bundle="v12"
    )


def placement(name: str = "eu-1") -> Placement:
    return Placement(
        name=name,
        region="eu-west",
        provider="local",
        authority_ceiling=AuthorityLevel.EXTERNAL_MUTATE,
        supported_release_ids=(release().release_id,),
        readable_schema_versions=("3",),
        environment=EnvironmentIdentity(placement=name, region="eu-west", provider="local", runtime_image="img:1"),
    )


def parts(task: str = "task") -> RunParts:
    return RunParts(
        run_kind=RunKind.RESEARCH,
        release=release(),
        placement=placement(),
        state=PortableRunState(task=task),
        operations=OperationLedger(),
        authority=AuthorityContext(level=AuthorityLevel.VERIFY, policy_id="p"),
        budget=BudgetLedger(
            limits=BudgetLimits(
                model_spend_usd=Decimal("1"),
                model_calls=10,
                search_expansions=10,
                tool_calls=10,
                browser_seconds=0,
                sandbox_seconds=0,
                verification_reserve_usd=Decimal("0.1"),
                retries=1,
                deadline=T0 + dt.timedelta(hours=1),
            )
        ),
    )


def observation(content_ref: str, source: str = "corpus://a", at: dt.datetime = T0) -> Observation:
    return Observation(source=source, observed_at=at, content_ref=content_ref, freshness_budget_s=60)
