import datetime as dt
import json
from decimal import Decimal

import pytest
from pydantic import ValidationError

from baton.errors import CheckpointIntegrityError
from baton.identity import sha256_ref
from baton.models import (
    Approval,
    AuthorityLevel,
    Boundary,
    BudgetUsage,
    ExecutionCheckpoint,
    ObservationSegment,
    PortabilityConstraints,
    ResumabilityClass,
    RunKind,
    SearchNode,
    SearchState,
    UseMode,
    VerdictResult,
    VerifierEvidence,
    checkpoint_id_for,
)
from baton.schema_export import EXPORTED, schema_documents

from builders.records import T0, observation, parts, placement, release

REF = sha256_ref(b"x")


def sealed(**overrides: object) -> ExecutionCheckpoint:
    fields: dict[str, object] = dict(
        run_id="run-1",
        checkpoint_id=checkpoint_id_for("run-1", 0),
        seq=0,
        run_kind=RunKind.DEPLOY,
        release_id=REF,
        environment_id=REF,
        placement_ref=REF,
        task_state_ref=REF,
        observation_manifest_ref=REF,
        candidate_manifest_ref=REF,
        verifier_evidence_ref=REF,
        operation_ledger_ref=REF,
        authority_context_ref=REF,
        budget_ledger_ref=REF,
        owner_epoch=1,
        boundary=Boundary.GENERATING,
        resumability=ResumabilityClass.R2,
        sealed_at=T0,
    )
    fields.update(overrides)
    return ExecutionCheckpoint.seal(**fields)


def test_checkpoint_json_roundtrip_is_exact() -> None:
    ckpt = sealed()
    again = ExecutionCheckpoint.model_validate_json(ckpt.model_dump_json())
    assert again == ckpt
    assert again.model_dump_json() == ckpt.model_dump_json()


def test_equal_checkpoints_hash_equal() -> None:
    assert sealed().checkpoint_hash == sealed().checkpoint_hash


@pytest.mark.parametrize(
    "field,value",
    [
        ("owner_epoch", 2),
        ("boundary", Boundary.VERIFIED),
        ("resumability", ResumabilityClass.R3),
        ("task_state_ref", sha256_ref(b"y")),
        ("sealed_at", T0 + dt.timedelta(microseconds=1)),
        ("constraints", PortabilityConstraints(portable_to_regions=("eu-west",))),
        ("resumability_reasons", ("r",)),
    ],
)
def test_any_field_change_changes_the_hash(field: str, value: object) -> None:
    assert sealed(**{field: value}).checkpoint_hash != sealed().checkpoint_hash


def test_tampered_checkpoint_is_refused_on_load() -> None:
    body = json.loads(sealed().model_dump_json())
    body["owner_epoch"] = 99
    with pytest.raises(CheckpointIntegrityError, match="tampered"):
        ExecutionCheckpoint.model_validate(body)


def test_checkpoint_refuses_a_non_ref() -> None:
    with pytest.raises(ValidationError):
        sealed(task_state_ref="../etc/passwd")


def test_checkpoint_id_must_match_run_and_seq() -> None:
    with pytest.raises(ValidationError):
        sealed(checkpoint_id=checkpoint_id_for("run-1", 5))


def test_models_are_frozen_and_strict() -> None:
    rel = release()
    with pytest.raises(ValidationError):
        rel.model = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        type(rel)(**rel.model_dump(), unexpected="x")


def test_release_id_changes_with_any_component() -> None:
    assert release("m-v7").release_id != release("m-v8").release_id
    assert release().release_id == release().release_id


def test_budget_usage_only_grows() -> None:
    ledger = parts().budget
    charged = ledger.charge(BudgetUsage(model_calls=3, model_spend_usd=Decimal("0.25")))
    assert charged.used.covers(ledger.used)
    assert not ledger.used.covers(charged.used)
    assert charged.used.model_spend_usd == Decimal("0.25")
    with pytest.raises(ValidationError):
        BudgetUsage(model_calls=-1)


def test_budget_exhaustion_names_the_limit() -> None:
    ledger = parts().budget.charge(BudgetUsage(model_calls=11))
    assert ledger.exhausted(T0) == ("model_calls",)
    assert "deadline" in parts().budget.exhausted(T0 + dt.timedelta(hours=2))


def test_observation_use_mode_follows_freshness_and_environment() -> None:
    obs = observation(REF)
    assert obs.required_use_mode(T0, environment_changed=False) is UseMode.USE_RECORDED_OBSERVATION
    assert obs.required_use_mode(T0, environment_changed=True) is UseMode.REVALIDATE_LIVE_STATE
    later = T0 + dt.timedelta(seconds=61)
    assert obs.required_use_mode(later, environment_changed=False) is UseMode.REFRESH_STALE_OBSERVATION


def test_evidence_binds_to_exact_hash() -> None:
    evidence = VerifierEvidence(candidate_hash=REF, verifier_version="v1", result=VerdictResult.PASS, verified_at=T0)
    assert evidence.applies_to(REF)
    assert not evidence.applies_to(sha256_ref(b"x "))


def test_search_state_lineage_is_validated() -> None:
    SearchState(nodes=(SearchNode(node_id="a"), SearchNode(node_id="b", parent_id="a")), frontier=("b",))
    with pytest.raises(ValidationError):
        SearchState(nodes=(SearchNode(node_id="b", parent_id="missing"),))
    with pytest.raises(ValidationError):
        SearchState(nodes=(SearchNode(node_id="a"),), frontier=("zzz",))
    with pytest.raises(ValidationError):
        SearchState(nodes=(SearchNode(node_id="a"), SearchNode(node_id="a")))


def test_authority_order_and_approval_binding() -> None:
    assert AuthorityLevel.lesser(AuthorityLevel.EXTERNAL_MUTATE, AuthorityLevel.VERIFY) is AuthorityLevel.VERIFY
    assert AuthorityLevel.EXTERNAL_MUTATE.allows(AuthorityLevel.OBSERVE)
    assert not AuthorityLevel.PLAN.allows(AuthorityLevel.SANDBOX_MUTATE)
    approval = Approval(
        approval_id="a1", operation="deploy", artifact_hash=REF, level=AuthorityLevel.EXTERNAL_MUTATE,
        approved_by="ops", expires_at=T0 + dt.timedelta(minutes=5),
    )
    assert approval.valid_for("deploy", REF, T0)
    assert not approval.valid_for("deploy", sha256_ref(b"other"), T0)
    assert not approval.valid_for("deploy", REF, T0 + dt.timedelta(minutes=5))


def test_constraints_are_canonical_sets() -> None:
    a = PortabilityConstraints(portable_to_regions=("us", "eu", "eu"))
    assert a.portable_to_regions == ("eu", "us")
    assert a.allows_region("eu") and not a.allows_region("ap")
    assert PortabilityConstraints().allows_provider("anything")


def test_observation_segment_total_non_negative() -> None:
    with pytest.raises(ValidationError):
        ObservationSegment(total=-1)


def test_placement_name_is_not_path_like() -> None:
    with pytest.raises(ValidationError):
        placement("../etc")


def test_json_schema_export_covers_the_checkpoint() -> None:
    documents = schema_documents()
    assert set(documents) == set(EXPORTED)
    checkpoint_schema = documents["execution_checkpoint"]
    assert "checkpoint_hash" in checkpoint_schema["properties"]  # type: ignore[operator]
    assert set(ExecutionCheckpoint.model_fields) <= set(checkpoint_schema["properties"])  # type: ignore[arg-type]
