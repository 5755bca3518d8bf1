"""Scripted model releases: deterministic, priced, and visibly different from each other."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from baton.agents.report_format import parse_claims, render_claim
from baton.agents.scripted_models import (
    RELEASES,
    BuildInfo,
    NoDeployableBuildError,
    count_tokens,
    model_for,
)
from baton.agents.verifiers import VERIFIER_RECORD_ENV, check_deployment_spec, verify_report
from baton.identity import sha256_ref
from baton.models import Observation, VerdictResult

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
DOCS = {
    "corpus://leases": b"Each run has at most one owner per epoch. Leases expire on the database clock.",
    "corpus://fencing": b"Targets reject older fencing tokens. A woken worker changes nothing.",
    "corpus://idempotency": b"One key, one side effect! Retries are harmless.",
}
BUILDS = [
    BuildInfo(version="1.4.2", artifact_hash=sha256_ref(b"1.4.2"), canary_passed=True),
    BuildInfo(version="1.10.0-rc1", artifact_hash=sha256_ref(b"1.10.0-rc1"), canary_passed=True),
    BuildInfo(version="1.9.0", artifact_hash=sha256_ref(b"1.9.0"), canary_passed=True),
    BuildInfo(version="2.0.0", artifact_hash=sha256_ref(b"2.0.0"), canary_passed=False),
]


def observations() -> list[tuple[Observation, bytes]]:
    return [
        (Observation(source=source, observed_at=T0, content_ref=sha256_ref(text), freshness_budget_s=60), text)
        for source, text in DOCS.items()
    ]


def recorded_refs() -> set[str]:
    return {obs.record_ref() for obs, _ in observations()}


def test_the_catalog_holds_two_releases_differing_only_in_the_model() -> None:
    v7, v8 = RELEASES["model-v7"], RELEASES["model-v8"]
    assert v7.release_id != v8.release_id
    differing = {name for name in type(v7).model_fields if getattr(v7, name) != getattr(v8, name)}
    assert differing == {"model"}


@pytest.mark.parametrize("name", ["model-v7", "model-v8"])
def test_same_inputs_give_the_same_outputs_tokens_and_charge(name: str) -> None:
    first = model_for(name).draft_report(observations(), topic="safety")
    second = model_for(RELEASES[name]).draft_report(observations(), topic="safety")
    assert first == second
    plan_a, plan_b = (model_for(name).plan_deployment("checkout", BUILDS) for _ in range(2))
    assert plan_a == plan_b


def test_v7_and_v8_propose_different_candidates_from_the_same_evidence() -> None:
    v7, v8 = model_for("model-v7"), model_for("model-v8")
    report7, report8 = v7.draft_report(observations()), v8.draft_report(observations())
    assert sha256_ref(report7.output) != sha256_ref(report8.output)
    first_claims = [parse_claims(report.text)[0].cited_refs for report in (report7, report8)]
    assert first_claims[0] != first_claims[1]  # different order
    assert verify_report(report7.output, recorded_refs()).passed
    assert verify_report(report8.output, recorded_refs()).passed
    plan7, plan8 = v7.plan_deployment("checkout", BUILDS), v8.plan_deployment("checkout", BUILDS)
    assert b'"version":"1.9.0"' in plan7.output and b'"strategy":"rolling"' in plan7.output
    assert b'"version":"1.10.0-rc1"' in plan8.output and b'"strategy":"canary"' in plan8.output
    assert check_deployment_spec(plan7.output, BUILDS).passed and check_deployment_spec(plan8.output, BUILDS).passed


def test_tokens_and_cost_are_computed_from_the_text() -> None:
    assert count_tokens("Hello, world!") == 4
    model = model_for("model-v8")
    reply = model.draft_report(observations())
    assert reply.output_tokens == count_tokens(reply.text) and reply.input_tokens > reply.output_tokens // 2
    expected = (reply.input_tokens * Decimal("3.00") + reply.output_tokens * Decimal("15.00")) / Decimal(1_000_000)
    assert reply.charge.model_spend_usd == expected and isinstance(reply.charge.model_spend_usd, Decimal)
    assert reply.charge.model_calls == 1 and reply.charge.tool_calls == 0
    cheaper = model_for("model-v7").draft_report(observations())
    assert cheaper.charge.model_spend_usd < reply.charge.model_spend_usd


def test_the_verifier_catches_an_uncited_claim() -> None:
    good = model_for("model-v7").draft_report(observations()).text
    bad = good + "- Leases never expire.\n"
    verdict = verify_report(bad, recorded_refs())
    assert verdict.result is VerdictResult.FAIL and "cites no observation" in verdict.detail


def test_the_verifier_catches_a_citation_of_an_unrecorded_observation() -> None:
    stray = sha256_ref(b"never recorded")
    report = "# R\n" + render_claim("Something unsupported.", (stray,)) + "\n"
    verdict = verify_report(report, recorded_refs())
    assert not verdict.passed and stray in verdict.detail
    assert verify_report("# Only a title\n", recorded_refs()).result is VerdictResult.FAIL


def test_deploy_planning_refuses_when_no_build_is_eligible() -> None:
    only_rc = [BuildInfo(version="3.0.0-rc1", artifact_hash=sha256_ref(b"x"), canary_passed=True)]
    with pytest.raises(NoDeployableBuildError):
        model_for("model-v7").plan_deployment("checkout", only_rc)
    assert b"3.0.0-rc1" in model_for("model-v8").plan_deployment("checkout", only_rc).output


def test_the_deploy_check_binds_to_the_observed_build() -> None:
    spec = model_for("model-v7").plan_deployment("checkout", BUILDS).output
    tampered = spec.replace(sha256_ref(b"1.9.0").encode(), sha256_ref(b"evil").encode())
    assert check_deployment_spec(tampered, BUILDS).result is VerdictResult.FAIL
    failed_canary = [b.model_copy(update={"canary_passed": False}) if b.version == "1.9.0" else b for b in BUILDS]
    assert not check_deployment_spec(spec, failed_canary).passed
    assert not check_deployment_spec(b"not json", BUILDS).passed


def test_the_deploy_verifier_records_each_verdict_where_its_variable_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = model_for("model-v7").plan_deployment("checkout", BUILDS).output
    record = tmp_path / "verdicts.jsonl"
    monkeypatch.delenv(VERIFIER_RECORD_ENV, raising=False)
    check_deployment_spec(spec, BUILDS)
    assert not record.exists()  # no variable, no record
    monkeypatch.setenv(VERIFIER_RECORD_ENV, str(record))
    check_deployment_spec(spec, BUILDS)
    check_deployment_spec(b"not json", BUILDS)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    body = json.loads(spec)
    assert [line["result"] for line in lines] == ["PASS", "FAIL"]
    assert lines[0]["content_sha256"] == sha256_ref(spec)
    assert {k: lines[0][k] for k in ("service", "version", "artifact_hash", "strategy")} == body
    assert lines[1]["content_sha256"] == sha256_ref(b"not json") and "version" not in lines[1]
