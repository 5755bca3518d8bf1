"""The compatibility gate: every reason code, every migration class, and its invariants."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.checkpoints import restore
from baton.compat import (
    BLOCKING,
    BehavioralMigration,
    GateReason,
    HandoffDecision,
    HandoffPolicy,
    MigrationApproval,
    MigrationClass,
    ResumeMode,
    evaluate_handoff,
    evaluate_restored,
)
from baton.models import (
    AuthorityLevel,
    ExecutionCheckpoint,
    OperationState,
    Placement,
    PortabilityConstraints,
    ResumabilityClass,
)
from baton.schema_versions import AnyCheckpoint
from baton.store.blobs import BlobStore

from builders.checkpoints import as_v1, chain, seal
from builders.records import T0, ledger, parts, placement, release

V7 = release("model-v7")
V8 = release("model-v8")
SOURCE = placement("eu-1")


@pytest.fixture
def checkpoint(blobs: BlobStore) -> ExecutionCheckpoint:
    return chain(blobs, 2)[-1]


def gate(
    checkpoint: AnyCheckpoint,
    target: Placement,
    policy: HandoffPolicy = HandoffPolicy(),
    *,
    source: Placement = SOURCE,
    authority: AuthorityLevel = AuthorityLevel.VERIFY,
    unresolved: bool = False,
    now: dt.datetime = T0,
) -> HandoffDecision:
    return evaluate_handoff(
        checkpoint, source, target, policy, now=now, release=V7, authority=authority, has_unresolved_operations=unresolved
    )


def with_constraints(blobs: BlobStore, constraints: PortabilityConstraints) -> ExecutionCheckpoint:
    return seal(blobs, parts(constraints=constraints))


def with_resumability(blobs: BlobStore, resumability: ResumabilityClass) -> ExecutionCheckpoint:
    return seal(blobs, parts(), resumability=resumability)


def migration_policy(*, approved: bool = True, expires: dt.datetime = T0 + dt.timedelta(hours=1)) -> HandoffPolicy:
    approvals = (
        (MigrationApproval(approval_id="a-1", from_release_id=V7.release_id, to_release_id=V8.release_id, approved_by="ops", expires_at=expires),)
        if approved
        else ()
    )
    return HandoffPolicy(
        allowed_behavioral_migrations=(BehavioralMigration(from_release_id=V7.release_id, to_release=V8),),
        approvals=approvals,
    )


# -- migration classes ---------------------------------------------------------------


def test_same_placement_other_worker_is_physical_with_nothing_to_redo(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, SOURCE)
    assert decision.allowed and decision.reasons == ()
    assert decision.migration_class is MigrationClass.PHYSICAL
    assert decision.resume_mode is ResumeMode.RESUME_WITH_RECORDED_OBSERVATIONS
    assert decision.authority_ceiling is AuthorityLevel.VERIFY
    assert decision.target_release_id == V7.release_id and decision.target_schema_version == "3"
    assert not (decision.requires_revalidation or decision.requires_reverification or decision.requires_reauthorization)


def test_other_placement_same_runtime_is_physical_but_revalidates(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, placement("eu-2"))
    assert decision.allowed and decision.migration_class is MigrationClass.PHYSICAL
    assert decision.reasons == (GateReason.ENVIRONMENT_CHANGED,)
    assert decision.requires_revalidation and not decision.requires_reverification


def test_older_schema_needing_a_transform_is_logical(blobs: BlobStore) -> None:
    legacy = as_v1(seal(blobs, parts()))
    decision = gate(legacy, placement("eu-2", schemas=("2",)))
    assert decision.allowed and decision.migration_class is MigrationClass.LOGICAL
    assert GateReason.SCHEMA_TRANSFORM_REQUIRED in decision.reasons
    assert decision.target_schema_version == "2"


def test_older_schema_readable_as_is_stays_physical(blobs: BlobStore) -> None:
    decision = gate(as_v1(seal(blobs, parts())), placement("eu-2", schemas=("1", "2")))
    assert decision.allowed and decision.migration_class is MigrationClass.PHYSICAL
    assert decision.target_schema_version == "1"


def test_approved_release_change_is_behavioral(checkpoint: ExecutionCheckpoint) -> None:
    target = placement("us-1", region="us-east", provider="cloudco", releases=(V8,))
    decision = gate(checkpoint, target, migration_policy())
    assert decision.allowed and decision.migration_class is MigrationClass.BEHAVIORAL
    assert GateReason.BEHAVIORAL_MIGRATION_APPROVED in decision.reasons
    assert decision.target_release_id == V8.release_id
    assert decision.requires_revalidation and decision.requires_reverification and decision.requires_reauthorization


# -- refusals --------------------------------------------------------------------------


def test_release_pinning_refuses_an_unsupported_release(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, placement("eu-2", releases=(V8,)))
    assert not decision.allowed
    assert decision.blocking_reasons == (GateReason.RELEASE_INCOMPATIBLE,)
    assert decision.migration_class is None and decision.resume_mode is ResumeMode.NONE
    assert decision.authority_ceiling is AuthorityLevel.NONE


@pytest.mark.parametrize(
    "policy",
    [migration_policy(approved=False), migration_policy(expires=T0), migration_policy(expires=T0 - dt.timedelta(seconds=1))],
    ids=["no-approval", "expires-now", "expired"],
)
def test_behavioral_migration_needs_a_live_approval(checkpoint: ExecutionCheckpoint, policy: HandoffPolicy) -> None:
    decision = gate(checkpoint, placement("eu-2", releases=(V8,)), policy)
    assert not decision.allowed
    assert decision.blocking_reasons == (GateReason.BEHAVIORAL_MIGRATION_UNAPPROVED,)


def test_approval_for_another_migration_does_not_count(checkpoint: ExecutionCheckpoint) -> None:
    other = MigrationApproval(
        approval_id="a-2", from_release_id=V8.release_id, to_release_id=V7.release_id, approved_by="ops", expires_at=T0 + dt.timedelta(days=1)
    )
    policy = migration_policy(approved=False).model_copy(update={"approvals": (other,)})
    assert gate(checkpoint, placement("eu-2", releases=(V8,)), policy).blocking_reasons == (
        GateReason.BEHAVIORAL_MIGRATION_UNAPPROVED,
    )


def test_newer_schema_is_unreadable_by_an_older_target(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, placement("eu-2", schemas=("1",)))
    assert decision.blocking_reasons == (GateReason.STATE_SCHEMA_INCOMPATIBLE,)


def test_schema_transform_can_be_forbidden_by_policy(blobs: BlobStore) -> None:
    legacy = as_v1(seal(blobs, parts()))
    decision = gate(legacy, placement("eu-2", schemas=("2",)), HandoffPolicy(allow_schema_transform=False))
    assert decision.blocking_reasons == (GateReason.SCHEMA_TRANSFORM_FORBIDDEN,)


@pytest.mark.parametrize(
    ("constraints", "target", "reason"),
    [
        (PortabilityConstraints(portable_to_regions=("eu-west",)), placement("us-1", region="us-east"), GateReason.REGION_NOT_ALLOWED),
        (PortabilityConstraints(portable_to_providers=("local",)), placement("c-1", provider="cloudco"), GateReason.PROVIDER_NOT_ALLOWED),
        (PortabilityConstraints(requires_hardware_attestation=True), placement("eu-2"), GateReason.HARDWARE_ATTESTATION_MISSING),
        (PortabilityConstraints(contains_non_exportable_state=True), placement("c-1", region="eu-central"), GateReason.NON_EXPORTABLE_STATE),
        (PortabilityConstraints(data_scope="customer-eu"), placement("eu-2", data_scopes=("public",)), GateReason.DATA_SCOPE_UNAVAILABLE),
    ],
)
def test_portability_constraints_refuse(blobs: BlobStore, constraints: PortabilityConstraints, target: Placement, reason: GateReason) -> None:
    decision = gate(with_constraints(blobs, constraints), target)
    assert decision.blocking_reasons == (reason,)


@pytest.mark.parametrize(
    ("constraints", "target"),
    [
        (PortabilityConstraints(portable_to_regions=("eu-west",)), placement("eu-2")),
        (PortabilityConstraints(requires_hardware_attestation=True), placement("eu-2", attested=True)),
        (PortabilityConstraints(contains_non_exportable_state=True), placement("eu-2")),  # same region and provider
        (PortabilityConstraints(data_scope="customer-eu"), placement("eu-2", data_scopes=("customer-eu",))),
    ],
)
def test_satisfied_constraints_allow(blobs: BlobStore, constraints: PortabilityConstraints, target: Placement) -> None:
    assert gate(with_constraints(blobs, constraints), target).allowed


@pytest.mark.parametrize(
    ("policy", "target", "reason"),
    [
        (HandoffPolicy(require_same_region=True), placement("c-1", region="eu-central"), GateReason.REGION_CHANGE_FORBIDDEN),
        (HandoffPolicy(require_same_provider=True), placement("c-1", provider="cloudco"), GateReason.PROVIDER_CHANGE_FORBIDDEN),
    ],
)
def test_policy_can_pin_region_and_provider(checkpoint: ExecutionCheckpoint, policy: HandoffPolicy, target: Placement, reason: GateReason) -> None:
    assert gate(checkpoint, target, policy).blocking_reasons == (reason,)


def test_missing_verifier_and_tool_contract_refuse(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, placement("eu-2", verifiers=("other-verifier",), tools=()))
    assert decision.blocking_reasons == (GateReason.VERIFIER_UNAVAILABLE, GateReason.TOOL_CONTRACT_UNAVAILABLE)


def test_behavioral_migration_checks_the_new_release_components(checkpoint: ExecutionCheckpoint) -> None:
    v9 = release("model-v9", tool_contract="tool-contract-10")
    policy = HandoffPolicy(
        allowed_behavioral_migrations=(BehavioralMigration(from_release_id=V7.release_id, to_release=v9),),
        approvals=(MigrationApproval(approval_id="a", from_release_id=V7.release_id, to_release_id=v9.release_id, approved_by="ops", expires_at=T0 + dt.timedelta(hours=1)),),
    )
    decision = gate(checkpoint, placement("eu-2", releases=(v9,)), policy)
    assert decision.blocking_reasons == (GateReason.TOOL_CONTRACT_UNAVAILABLE,)


@pytest.mark.parametrize(
    ("resumability", "reason"),
    [(ResumabilityClass.R0, GateReason.CHECKPOINT_NOT_RESUMABLE), (ResumabilityClass.MIGRATION_UNSAFE, GateReason.MIGRATION_UNSAFE)],
)
def test_unresumable_checkpoints_are_refused(blobs: BlobStore, resumability: ResumabilityClass, reason: GateReason) -> None:
    assert gate(with_resumability(blobs, resumability), SOURCE).blocking_reasons == (reason,)


# -- authority, environment and resume mode ------------------------------------------


def test_authority_is_capped_by_the_target_ceiling_and_the_downgrade_is_reported(checkpoint: ExecutionCheckpoint) -> None:
    target = placement("eu-2", ceiling=AuthorityLevel.SANDBOX_MUTATE)
    decision = gate(checkpoint, target, authority=AuthorityLevel.EXTERNAL_MUTATE)
    assert decision.allowed
    assert decision.authority_ceiling is AuthorityLevel.SANDBOX_MUTATE
    assert GateReason.AUTHORITY_DOWNGRADED in decision.reasons and decision.requires_reauthorization


def test_authority_never_grows_beyond_the_checkpoint(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, placement("eu-2", ceiling=AuthorityLevel.EXTERNAL_MUTATE), authority=AuthorityLevel.OBSERVE)
    assert decision.authority_ceiling is AuthorityLevel.OBSERVE
    assert GateReason.AUTHORITY_DOWNGRADED not in decision.reasons


def test_policy_can_forbid_downgrade(checkpoint: ExecutionCheckpoint) -> None:
    target = placement("eu-2", ceiling=AuthorityLevel.PLAN)
    decision = gate(checkpoint, target, HandoffPolicy(allow_authority_downgrade=False), authority=AuthorityLevel.VERIFY)
    assert decision.blocking_reasons == (GateReason.AUTHORITY_DOWNGRADE_FORBIDDEN,)


def test_changed_runtime_requires_reverification(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, placement("eu-2", image="worker:2", tool_versions={"pytest": "9.0"}))
    assert decision.allowed
    assert decision.reasons == (GateReason.ENVIRONMENT_CHANGED, GateReason.RUNTIME_CHANGED)
    assert decision.requires_revalidation and decision.requires_reverification


def test_unresolved_operations_mean_reconcile_first(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, SOURCE, unresolved=True)
    assert decision.allowed and decision.resume_mode is ResumeMode.RECONCILE_THEN_RESUME
    assert decision.reasons == (GateReason.UNRESOLVED_OPERATIONS,)


@pytest.mark.parametrize(
    ("resumability", "mode"),
    [
        (ResumabilityClass.R1, ResumeMode.RESTART_FROM_PREVIOUS_BOUNDARY),
        (ResumabilityClass.R2, ResumeMode.RESUME_DETERMINISTIC),
        (ResumabilityClass.R3, ResumeMode.RESUME_WITH_RECORDED_OBSERVATIONS),
        (ResumabilityClass.R4, ResumeMode.RESUME_AFTER_OWNERSHIP_TRANSFER),
        (ResumabilityClass.R5, ResumeMode.RECONCILE_THEN_RESUME),
    ],
)
def test_resume_mode_follows_the_resumability_class(blobs: BlobStore, resumability: ResumabilityClass, mode: ResumeMode) -> None:
    assert gate(with_resumability(blobs, resumability), SOURCE).resume_mode is mode


def test_evaluate_restored_reads_source_release_authority_and_ledger(blobs: BlobStore) -> None:
    checkpoint = seal(blobs, parts(operations=ledger(OperationState.UNKNOWN), authority=AuthorityLevel.EXTERNAL_MUTATE))
    decision = evaluate_restored(restore(blobs, checkpoint), placement("eu-2", ceiling=AuthorityLevel.VERIFY), HandoffPolicy(), now=T0)
    assert decision.allowed
    assert decision.authority_ceiling is AuthorityLevel.VERIFY
    assert decision.resume_mode is ResumeMode.RECONCILE_THEN_RESUME
    assert set(decision.reasons) == {GateReason.AUTHORITY_DOWNGRADED, GateReason.ENVIRONMENT_CHANGED, GateReason.UNRESOLVED_OPERATIONS}


def test_a_release_record_that_is_not_the_checkpoints_is_rejected(checkpoint: ExecutionCheckpoint) -> None:
    with pytest.raises(ValueError, match="not the checkpoint's release"):
        evaluate_handoff(checkpoint, SOURCE, SOURCE, HandoffPolicy(), now=T0, release=V8, authority=AuthorityLevel.VERIFY)


def test_decision_is_a_hashable_record_for_events(checkpoint: ExecutionCheckpoint) -> None:
    decision = gate(checkpoint, placement("eu-2"))
    assert HandoffDecision.model_validate_json(decision.model_dump_json()) == decision
    assert decision.record_ref() == gate(checkpoint, placement("eu-2")).record_ref()


# -- properties ------------------------------------------------------------------------

LEVELS = list(AuthorityLevel)


@st.composite
def targets(draw: st.DrawFn) -> Placement:
    return placement(
        draw(st.sampled_from(["eu-1", "eu-2", "us-1"])),
        region=draw(st.sampled_from(["eu-west", "us-east"])),
        provider=draw(st.sampled_from(["local", "cloudco"])),
        ceiling=draw(st.sampled_from(LEVELS)),
        releases=draw(st.sampled_from([(V7,), (V8,), (V7, V8), ()])),
        schemas=draw(st.sampled_from([("1",), ("2",), ("1", "2"), ()])),
        verifiers=draw(st.sampled_from([("verifier-bundle-12",), ()])),
        tools=draw(st.sampled_from([("tool-contract-9",), ()])),
        data_scopes=draw(st.sampled_from([("customer-eu",), ()])),
        attested=draw(st.booleans()),
        image=draw(st.sampled_from(["worker:1", "worker:2"])),
    )


constraint_sets = st.builds(
    PortabilityConstraints,
    portable_to_regions=st.sampled_from([(), ("eu-west",)]),
    portable_to_providers=st.sampled_from([(), ("local",)]),
    requires_hardware_attestation=st.booleans(),
    contains_non_exportable_state=st.booleans(),
    data_scope=st.sampled_from([None, "customer-eu"]),
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=targets(),
    constraints=constraint_sets,
    authority=st.sampled_from(LEVELS),
    approved=st.booleans(),
    policy_flags=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
)
def test_gate_invariants(
    blobs: BlobStore,
    target: Placement,
    constraints: PortabilityConstraints,
    authority: AuthorityLevel,
    approved: bool,
    policy_flags: tuple[bool, bool, bool, bool],
) -> None:
    checkpoint = with_constraints(blobs, constraints)
    same_region, same_provider, transform, downgrade = policy_flags
    policy = migration_policy(approved=approved).model_copy(
        update={
            "require_same_region": same_region,
            "require_same_provider": same_provider,
            "allow_schema_transform": transform,
            "allow_authority_downgrade": downgrade,
        }
    )
    decision = gate(checkpoint, target, policy, authority=authority)
    assert decision == gate(checkpoint, target, policy, authority=authority)  # deterministic
    assert decision.allowed == (not any(reason in BLOCKING for reason in decision.reasons))
    assert decision.authority_ceiling.rank <= min(authority.rank, target.authority_ceiling.rank)  # invariant 7
    assert len(set(decision.reasons)) == len(decision.reasons)
    if decision.allowed:
        assert decision.target_release_id in target.supported_release_ids
        assert decision.target_schema_version in target.readable_schema_versions
        assert (decision.migration_class is MigrationClass.BEHAVIORAL) == (decision.target_release_id != V7.release_id)
    else:
        assert decision.migration_class is None and decision.authority_ceiling is AuthorityLevel.NONE


def test_every_reason_code_is_produced_by_some_handoff(blobs: BlobStore, checkpoint: ExecutionCheckpoint) -> None:
    legacy = as_v1(seal(blobs, parts()))
    elsewhere = placement("us-1", region="us-east", provider="cloudco", image="worker:2")
    scenarios = [
        gate(with_resumability(blobs, ResumabilityClass.R0), SOURCE),
        gate(with_resumability(blobs, ResumabilityClass.MIGRATION_UNSAFE), SOURCE),
        gate(checkpoint, placement("eu-2", releases=(V8,))),
        gate(checkpoint, placement("eu-2", releases=(V8,)), migration_policy()),
        gate(checkpoint, placement("eu-2", releases=(V8,)), migration_policy(approved=False)),
        gate(checkpoint, placement("eu-2", schemas=("1",))),
        gate(legacy, SOURCE),
        gate(legacy, SOURCE, HandoffPolicy(allow_schema_transform=False)),
        gate(
            with_constraints(
                blobs,
                PortabilityConstraints(
                    portable_to_regions=("eu-west",),
                    portable_to_providers=("local",),
                    requires_hardware_attestation=True,
                    contains_non_exportable_state=True,
                    data_scope="customer-eu",
                ),
            ),
            elsewhere,
            HandoffPolicy(require_same_region=True, require_same_provider=True),
        ),
        gate(checkpoint, placement("eu-2", verifiers=(), tools=())),
        gate(checkpoint, placement("eu-2", ceiling=AuthorityLevel.OBSERVE)),
        gate(checkpoint, placement("eu-2", ceiling=AuthorityLevel.OBSERVE), HandoffPolicy(allow_authority_downgrade=False)),
        gate(checkpoint, SOURCE, unresolved=True),
    ]
    produced = {reason for decision in scenarios for reason in decision.reasons}
    assert produced == set(GateReason)
