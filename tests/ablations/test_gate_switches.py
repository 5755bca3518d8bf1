"""The compatibility gate's switches: schema-gate, verifier-gate and `gate:<reason>` for every reason.

Each scenario is a handoff whose incompatibility is a plain fact about the
records it is built from (the target placement does not list the release,
cannot read the schema, lacks the verifier bundle, ...), checked here on those
records without the gate. With its switch off the gate refuses with that
reason alone; with the switch on the same handoff is allowed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from baton.ablation import Ablation, ablation_env, parse_ablations
from baton.compat import (
    BLOCKING,
    BehavioralMigration,
    GateReason,
    HandoffDecision,
    HandoffPolicy,
    MigrationApproval,
    ResumeMode,
    evaluate_handoff,
)
from baton.models import AuthorityLevel, Placement, PortabilityConstraints, ResumabilityClass
from baton.schema_versions import AnyCheckpoint
from baton.store.blobs import BlobStore

from builders.checkpoints import as_v1, seal
from builders.records import T0, parts, placement, release

V7, V8 = release("model-v7"), release("model-v8")
SOURCE = placement("eu-1")
R = GateReason


@dataclass(frozen=True)
class Handoff:
    checkpoint: AnyCheckpoint
    target: Placement
    policy: HandoffPolicy = HandoffPolicy()
    authority: AuthorityLevel = AuthorityLevel.VERIFY
    unresolved: bool = False

    def decide(self) -> HandoffDecision:
        return evaluate_handoff(self.checkpoint, SOURCE, self.target, self.policy, now=T0, release=V7,
                                authority=self.authority, has_unresolved_operations=self.unresolved)


def unapproved_migration() -> HandoffPolicy:
    return HandoffPolicy(allowed_behavioral_migrations=(BehavioralMigration(from_release_id=V7.release_id, to_release=V8),))


def constrained(blobs: BlobStore, **constraints: object) -> AnyCheckpoint:
    return seal(blobs, parts(constraints=PortabilityConstraints(**constraints)))  # type: ignore[arg-type]


# reason -> (the handoff, the fact that makes it unsafe, read from the records without the gate)
Scenario = tuple[Callable[[BlobStore], Handoff], Callable[[Handoff], bool]]
SCENARIOS: dict[GateReason, Scenario] = {
    R.CHECKPOINT_NOT_RESUMABLE: (
        lambda b: Handoff(seal(b, parts(), resumability=ResumabilityClass.R0), SOURCE),
        lambda h: h.checkpoint.resumability is ResumabilityClass.R0),
    R.MIGRATION_UNSAFE: (
        lambda b: Handoff(seal(b, parts(), resumability=ResumabilityClass.MIGRATION_UNSAFE), SOURCE),
        lambda h: h.checkpoint.resumability is ResumabilityClass.MIGRATION_UNSAFE),
    R.RELEASE_INCOMPATIBLE: (
        lambda b: Handoff(seal(b, parts()), placement("eu-2", releases=(V8,))),
        lambda h: h.checkpoint.release_id not in h.target.supported_release_ids),
    R.BEHAVIORAL_MIGRATION_UNAPPROVED: (
        lambda b: Handoff(seal(b, parts()), placement("eu-2", releases=(V8,)), unapproved_migration()),
        lambda h: h.checkpoint.release_id not in h.target.supported_release_ids and not h.policy.approvals),
    R.STATE_SCHEMA_INCOMPATIBLE: (
        lambda b: Handoff(seal(b, parts()), placement("eu-2", schemas=("1",))),
        lambda h: h.checkpoint.schema_version not in h.target.readable_schema_versions),
    R.SCHEMA_TRANSFORM_FORBIDDEN: (
        lambda b: Handoff(as_v1(seal(b, parts())), placement("eu-2", schemas=("2",)),
                          HandoffPolicy(allow_schema_transform=False)),
        lambda h: h.checkpoint.schema_version not in h.target.readable_schema_versions),
    R.REGION_NOT_ALLOWED: (
        lambda b: Handoff(constrained(b, portable_to_regions=("eu-west",)), placement("us-1", region="us-east")),
        lambda h: h.target.region not in h.checkpoint.constraints.portable_to_regions),  # type: ignore[union-attr]
    R.PROVIDER_NOT_ALLOWED: (
        lambda b: Handoff(constrained(b, portable_to_providers=("local",)), placement("c-1", provider="cloudco")),
        lambda h: h.target.provider not in h.checkpoint.constraints.portable_to_providers),  # type: ignore[union-attr]
    R.HARDWARE_ATTESTATION_MISSING: (
        lambda b: Handoff(constrained(b, requires_hardware_attestation=True), placement("eu-2")),
        lambda h: not h.target.hardware_attested),
    R.NON_EXPORTABLE_STATE: (
        lambda b: Handoff(constrained(b, contains_non_exportable_state=True), placement("c-1", region="eu-central")),
        lambda h: h.target.region != SOURCE.region),
    R.DATA_SCOPE_UNAVAILABLE: (
        lambda b: Handoff(constrained(b, data_scope="customer-eu"), placement("eu-2", data_scopes=("public",))),
        lambda h: "customer-eu" not in h.target.data_scopes),
    R.REGION_CHANGE_FORBIDDEN: (
        lambda b: Handoff(seal(b, parts()), placement("c-1", region="eu-central"), HandoffPolicy(require_same_region=True)),
        lambda h: h.target.region != SOURCE.region),
    R.PROVIDER_CHANGE_FORBIDDEN: (
        lambda b: Handoff(seal(b, parts()), placement("c-1", provider="cloudco"), HandoffPolicy(require_same_provider=True)),
        lambda h: h.target.provider != SOURCE.provider),
    R.VERIFIER_UNAVAILABLE: (
        lambda b: Handoff(seal(b, parts()), placement("eu-2", verifiers=("other-verifier",))),
        lambda h: V7.verifier_bundle not in h.target.verifiers),
    R.TOOL_CONTRACT_UNAVAILABLE: (
        lambda b: Handoff(seal(b, parts()), placement("eu-2", tools=())),
        lambda h: V7.tool_contract not in h.target.tools),
    R.AUTHORITY_DOWNGRADE_FORBIDDEN: (
        lambda b: Handoff(seal(b, parts()), placement("eu-2", ceiling=AuthorityLevel.PLAN),
                          HandoffPolicy(allow_authority_downgrade=False)),
        lambda h: not h.target.authority_ceiling.allows(h.authority)),
}


def test_every_blocking_reason_has_a_scenario_and_a_switch_name() -> None:
    assert set(SCENARIOS) == set(BLOCKING)
    assert parse_ablations(",".join(f"gate:{reason.value}" for reason in GateReason)) == {
        f"gate:{reason.value}" for reason in GateReason}


@pytest.mark.parametrize("reason", sorted(SCENARIOS, key=lambda r: r.value), ids=lambda r: r.value)
def test_each_blocking_reason_refuses_until_its_switch_is_on(blobs: BlobStore, reason: GateReason) -> None:
    build, unsafe = SCENARIOS[reason]
    handoff = build(blobs)
    assert unsafe(handoff)  # the fact, from the records alone
    refused = handoff.decide()
    assert not refused.allowed and refused.blocking_reasons == (reason,)
    with ablation_env(f"gate:{reason.value}"):
        ablated = handoff.decide()
    assert ablated.allowed and reason not in ablated.reasons
    assert ablated.target_release_id is not None and ablated.target_schema_version is not None


@pytest.mark.parametrize(
    ("switch", "reasons"),
    [
        (Ablation.SCHEMA_GATE, (R.STATE_SCHEMA_INCOMPATIBLE, R.SCHEMA_TRANSFORM_FORBIDDEN)),
        (Ablation.VERIFIER_GATE, (R.VERIFIER_UNAVAILABLE,)),
    ],
    ids=lambda value: value.value if isinstance(value, Ablation) else "",
)
def test_schema_and_verifier_gates_are_switched_off_whole(blobs: BlobStore, switch: Ablation, reasons: tuple[GateReason, ...]) -> None:
    for reason in reasons:
        build, unsafe = SCENARIOS[reason]
        handoff = build(blobs)
        assert unsafe(handoff) and not handoff.decide().allowed
        with ablation_env(switch.value):
            decision = handoff.decide()
        assert decision.allowed, reason
        # the schema the run resumes under is one the target cannot read (schema-gate), or the
        # verifier it needs is not there (verifier-gate): the facts have not changed
        assert unsafe(handoff)


def test_a_switched_off_reason_leaves_the_others_blocking(blobs: BlobStore) -> None:
    handoff = Handoff(seal(blobs, parts()), placement("eu-2", releases=(V8,), verifiers=("other-verifier",)))
    with ablation_env("gate:release_incompatible"):
        decision = handoff.decide()
    assert not decision.allowed and decision.blocking_reasons == (R.VERIFIER_UNAVAILABLE,)


def test_non_blocking_reasons_lose_what_they_require(blobs: BlobStore) -> None:
    """The reasons that only shape the resume: without them, nothing is revalidated, reconciled or capped."""
    moved = Handoff(seal(blobs, parts()), placement("eu-2", image="worker:2", tool_versions={"pytest": "9.0"},
                                                        ceiling=AuthorityLevel.SANDBOX_MUTATE),
                    authority=AuthorityLevel.EXTERNAL_MUTATE, unresolved=True)
    on = moved.decide()
    assert on.requires_revalidation and on.requires_reverification and on.requires_reauthorization
    assert on.resume_mode is ResumeMode.RECONCILE_THEN_RESUME and on.authority_ceiling is AuthorityLevel.SANDBOX_MUTATE
    with ablation_env("gate:environment_changed", "gate:runtime_changed", "gate:unresolved_operations",
                      "gate:authority_downgraded"):
        off = moved.decide()
    assert off.allowed and not off.requires_revalidation and not off.requires_reverification
    assert off.resume_mode is not ResumeMode.RECONCILE_THEN_RESUME
    assert off.authority_ceiling is AuthorityLevel.EXTERNAL_MUTATE  # above the target's ceiling
    assert not moved.target.authority_ceiling.allows(off.authority_ceiling)


def test_unresolved_operations_off_takes_the_r5_reconcile_first_with_it(blobs: BlobStore) -> None:
    """R5 is the checkpoint's own ledger of the same open operations the reason names (rank_targets adds it)."""
    moved = Handoff(seal(blobs, parts(), resumability=ResumabilityClass.R5), placement("eu-2"), unresolved=True)
    assert moved.decide().resume_mode is ResumeMode.RECONCILE_THEN_RESUME
    with ablation_env("gate:unresolved_operations"):
        off = moved.decide()
    assert off.allowed and off.resume_mode is ResumeMode.RESUME_WITH_RECORDED_OBSERVATIONS


def test_an_approved_migration_is_unaffected_by_unrelated_switches(blobs: BlobStore) -> None:
    policy = HandoffPolicy(
        allowed_behavioral_migrations=(BehavioralMigration(from_release_id=V7.release_id, to_release=V8),),
        approvals=(MigrationApproval(approval_id="a-1", from_release_id=V7.release_id, to_release_id=V8.release_id,
                                     approved_by="ops", expires_at=T0 + dt.timedelta(hours=1)),),
    )
    handoff = Handoff(seal(blobs, parts()), placement("eu-2", releases=(V8,)), policy)
    with ablation_env(Ablation.VERIFIER_GATE.value, "gate:region_not_allowed"):
        decision = handoff.decide()
    assert decision.allowed and decision.target_release_id == V8.release_id
