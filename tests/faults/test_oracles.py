"""Each oracle says yes on files that show the fault and no on files that do not (the checks can fail)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from baton.agents.report_format import render_claim
from baton.agents.verifiers import VERIFIER_RECORD_ENV, verify_report
from baton.faults.oracles import Question, answer
from baton.targets.corpus_service import publication_payload

RUN = "case-abc123"
GOOD = {"artifact_hash": "sha256:" + "a" * 64, "version": "1.4.2", "canary_passed": True}
BAD_CANARY = {"artifact_hash": "sha256:" + "b" * 64, "version": "1.5.0", "canary_passed": False}


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _case(tmp_path: Path, *, status: str = "verified", calls: int = 1, billed: int = 1,
          deployments: list[dict[str, Any]] | None = None, requests: list[dict[str, Any]] | None = None,
          publications: list[dict[str, Any]] | None = None, documents: dict[str, Any] | None = None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "reported.json").write_text(json.dumps(
        {"run_id": RUN, "status": status, "model_calls": calls, "model_spend_usd": str(calls * 0.5), "limits": {}}))
    (tmp_path / "build-registry.json").write_text(json.dumps({"service": "checkout", "builds": [GOOD, BAD_CANARY]}))
    _write_lines(tmp_path / "provider" / "bill.jsonl",
                 [{"account": RUN, "usd": "0.5"}] * billed + [{"account": "someone-else", "usd": "9"}])
    targets = tmp_path / "home" / "targets"
    default = [{"seq": 1, "run_id": RUN, "idempotency_key": "k1", **{k: GOOD[k] for k in ("artifact_hash", "version")}}]
    _write_lines(targets / "deploy" / "deployments.jsonl", default if deployments is None else deployments)
    _write_lines(targets / "deploy" / "requests.jsonl", requests or [])
    _write_lines(targets / "corpus" / "publications.jsonl", publications or [])
    (targets / "corpus" / "documents.json").write_text(json.dumps({"format": 1, "documents": documents or {}}))
    return tmp_path


def _yes(root: Path) -> set[Question]:
    return {question for question, evidence in answer(root).items() if evidence}


def test_a_clean_run_answers_no_everywhere(tmp_path: Path) -> None:
    assert _yes(_case(tmp_path)) == set()


def test_two_effects_for_one_run_are_a_duplicate_whatever_their_keys(tmp_path: Path) -> None:
    rows = [{"seq": n, "run_id": RUN, "idempotency_key": f"k{n}", "artifact_hash": GOOD["artifact_hash"],
             "version": "1.4.2"} for n in (1, 2)]
    assert Question.DUPLICATE in _yes(_case(tmp_path, deployments=rows))


def test_a_request_applied_below_a_seen_epoch_is_a_stale_owner(tmp_path: Path) -> None:
    requests = [{"run_id": RUN, "epoch": 3, "result": "applied", "operation_id": "a"},
                {"run_id": RUN, "epoch": 2, "result": "applied", "operation_id": "b"}]
    assert Question.STALE_OWNER in _yes(_case(tmp_path, requests=requests))
    refused = [requests[0], {**requests[1], "result": "fenced"}]
    assert Question.STALE_OWNER not in _yes(_case(tmp_path / "refused", requests=refused))


def test_an_unregistered_or_failed_canary_artifact_is_the_wrong_artifact(tmp_path: Path) -> None:
    tampered = [{"seq": 1, "run_id": RUN, "idempotency_key": "k", "artifact_hash": "sha256:" + "c" * 64,
                 "version": "1.4.2"}]
    assert Question.WRONG_ARTIFACT in _yes(_case(tmp_path / "a", deployments=tampered))
    canary = [{"seq": 1, "run_id": RUN, "idempotency_key": "k", **{k: BAD_CANARY[k] for k in ("artifact_hash", "version")}}]
    assert Question.WRONG_ARTIFACT in _yes(_case(tmp_path / "b", deployments=canary))


def test_a_report_quoting_a_superseded_version_is_stale(tmp_path: Path) -> None:
    documents = {"fencing": [
        {"version": 1, "text": "Old claim holds. More.", "changed_at": "2026-01-01T00:00:00Z"},
        {"version": 2, "text": "New claim holds. More.", "changed_at": "2026-01-01T00:00:05Z"}]}
    stale = [{"run_id": RUN, "report": "fencing states that old claim holds.", "at": "2026-01-01T00:00:09Z"}]
    fresh = [{"run_id": RUN, "report": "fencing states that new claim holds.", "at": "2026-01-01T00:00:09Z"}]
    early = [{"run_id": RUN, "report": "fencing states that old claim holds.", "at": "2026-01-01T00:00:02Z"}]
    assert Question.STALE_EVIDENCE in _yes(_case(tmp_path / "s", deployments=[], publications=stale, documents=documents))
    assert Question.STALE_EVIDENCE not in _yes(_case(tmp_path / "f", deployments=[], publications=fresh,
                                                     documents=documents))
    assert Question.STALE_EVIDENCE not in _yes(_case(tmp_path / "e", deployments=[], publications=early,
                                                     documents=documents))


def test_a_bill_above_what_the_run_accounted_is_a_budget_reset(tmp_path: Path) -> None:
    assert Question.BUDGET in _yes(_case(tmp_path, calls=1, billed=2))


def test_failed_with_an_effect_or_verified_without_one_hides_the_truth(tmp_path: Path) -> None:
    assert Question.UNKNOWN_HIDDEN in _yes(_case(tmp_path / "a", status="failed"))
    assert Question.UNKNOWN_HIDDEN in _yes(_case(tmp_path / "b", status="verified", deployments=[]))
    assert Question.UNKNOWN_HIDDEN not in _yes(_case(tmp_path / "c", status="escalated"))


def test_no_outcome_reported_while_a_target_holds_the_effect_hides_it(tmp_path: Path) -> None:
    assert Question.UNKNOWN_HIDDEN in _yes(_case(tmp_path / "a", status="active"))
    assert Question.UNKNOWN_HIDDEN not in _yes(_case(tmp_path / "b", status="active", deployments=[]))


def test_a_committed_key_sent_again_under_a_new_operation_is_an_unreconciled_retry(tmp_path: Path) -> None:
    first = {"run_id": RUN, "epoch": 2, "result": "applied", "operation_id": "op-1", "idempotency_key": "k"}
    again = {"run_id": RUN, "epoch": 4, "result": "replayed", "operation_id": "op-2", "idempotency_key": "k"}
    assert Question.UNRECONCILED_RETRY in _yes(_case(tmp_path / "a", requests=[first, again]))
    same_operation = {**again, "operation_id": "op-1", "result": "sealed"}
    assert Question.UNRECONCILED_RETRY not in _yes(_case(tmp_path / "b", requests=[first, same_operation]))


V7, V8 = "sha256:" + "7" * 64, "sha256:" + "8" * 64


def _released(tmp_path: Path, served: str, effect_at: str) -> Path:
    root = _case(tmp_path, deployments=[{"seq": 1, "run_id": RUN, "idempotency_key": "k1", "at": effect_at,
                                         **{k: GOOD[k] for k in ("artifact_hash", "version")}}])
    _write_lines(root / "provider" / "bill.jsonl", [
        {"account": RUN, "usd": "0.5", "at": "2026-12-02T02:00:00+00:00", "model": "m7", "release_id": served}])
    _write_lines(root / "provider" / "release-changes.jsonl",
                 [{"at": "2026-12-02T02:00:05+00:00", "withdrawn": [V7], "published": {}}])
    return root


def test_an_effect_resting_on_a_withdrawn_release_is_caught(tmp_path: Path) -> None:
    assert Question.WITHDRAWN_RELEASE in _yes(_released(tmp_path / "late", V7, "2026-12-02T02:00:09Z"))
    assert Question.WITHDRAWN_RELEASE not in _yes(_released(tmp_path / "early", V7, "2026-12-02T02:00:01Z"))
    assert Question.WITHDRAWN_RELEASE not in _yes(_released(tmp_path / "other", V8, "2026-12-02T02:00:09Z"))


def test_a_planted_secret_in_blob_bytes_is_caught_and_only_there(tmp_path: Path) -> None:
    root = _case(tmp_path)
    (root / "planted-secrets.json").write_text(json.dumps(["AKIAZ7BATONFAULTS123"]))
    (root / "home" / "targets" / "corpus" / "copy.txt").write_text("key AKIAZ7BATONFAULTS123")
    assert Question.SECRET_IN_STATE not in _yes(root)  # the target's own files are not portable state
    blob = root / "home" / "blobs" / "ab" / "cdef"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b'{"content": "... AKIAZ7BATONFAULTS123 ..."}')
    assert Question.SECRET_IN_STATE in _yes(root)


def _presented(tmp_path: Path, placement: str, change: dict[str, str], rule: dict[str, list[str]]) -> Path:
    root = _case(tmp_path)
    _write_lines(root / "home" / "targets" / "deploy" / "presented.jsonl", [
        {"at": "2026-12-02T02:00:09Z", "operation_id": "op-1", "run_id": RUN, "epoch": 2, "placement": placement,
         "level": "EXTERNAL_MUTATE"}])
    _write_lines(root / "placement-changes.jsonl", [{"at": "2026-12-02T02:00:05+00:00", "placement": "cloud-eu",
                                                     **change}])
    (root / "residency.json").write_text(json.dumps(rule))
    return root


def test_a_mutation_from_a_placement_outside_the_rule_is_caught(tmp_path: Path) -> None:
    eu = {"regions": ["eu-central", "eu-west"], "providers": []}
    assert Question.WRONG_PLACEMENT in _yes(_presented(tmp_path / "a", "cloud-eu", {"region": "us-east"}, eu))
    assert Question.WRONG_PLACEMENT not in _yes(_presented(tmp_path / "b", "local-gpu-eu", {"region": "us-east"}, eu))
    own = {"regions": [], "providers": ["cloudco", "local"]}
    assert Question.WRONG_PLACEMENT in _yes(_presented(tmp_path / "c", "cloud-eu", {"provider": "othercloud"}, own))
    assert Question.WRONG_PLACEMENT in _yes(_presented(tmp_path / "d", "cloud-eu",
                                                       {"authority_ceiling": "SANDBOX_MUTATE"}, own))


NEEDS = {"state_schema": "3", "verifier_bundle": "citations-1+deploy-check-1", "tool_contract": "corpus-deploy-tools-2"}


def _unfit(tmp_path: Path, placement: str, change: dict[str, Any]) -> Path:
    root = _presented(tmp_path, placement, change, {"regions": [], "providers": []})
    (root / "run-needs.json").write_text(json.dumps(NEEDS))
    return root


def test_a_mutation_from_a_placement_that_cannot_host_the_run_is_caught(tmp_path: Path) -> None:
    assert Question.UNFIT_PLACEMENT in _yes(_unfit(tmp_path / "a", "cloud-eu", {"readable_schema_versions": ["1", "2"]}))
    assert Question.UNFIT_PLACEMENT in _yes(_unfit(tmp_path / "b", "cloud-eu", {"verifiers": ["citations-1"]}))
    assert Question.UNFIT_PLACEMENT in _yes(_unfit(tmp_path / "c", "cloud-eu", {"tools": ["python"]}))
    assert Question.UNFIT_PLACEMENT not in _yes(_unfit(tmp_path / "d", "local-gpu-eu", {"tools": ["python"]}))
    assert Question.UNFIT_PLACEMENT not in _yes(_unfit(tmp_path / "e", "cloud-eu", {"readable_schema_versions": ["3"]}))
    late = _unfit(tmp_path / "f", "cloud-eu", {"verifiers": ["citations-1"]})
    _write_lines(late / "placement-changes.jsonl", [{"at": "2026-12-02T02:00:10+00:00", "placement": "cloud-eu",
                                                     "verifiers": ["citations-1"]}])
    assert Question.UNFIT_PLACEMENT not in _yes(late)  # admitted before the operator's change


def test_a_deployment_the_verifier_never_passed_is_an_unverified_effect(tmp_path: Path) -> None:
    spec = {"service": "checkout", "version": "1.4.2", "artifact_hash": GOOD["artifact_hash"], "strategy": "rolling"}
    rows = [{"seq": 1, "run_id": RUN, "idempotency_key": "k1", "at": "2026-12-03T10:00:05.000000Z", **spec}]
    verified = _case(tmp_path / "verified", deployments=rows)
    _write_lines(verified / "home" / "targets" / "verifier" / "verdicts.jsonl",
                 [{**spec, "result": "PASS", "at": "2026-12-03T10:00:04+00:00"}])
    assert _yes(verified) == set()
    replanned = _case(tmp_path / "replanned", deployments=rows)
    _write_lines(replanned / "home" / "targets" / "verifier" / "verdicts.jsonl",
                 [{**spec, "version": "1.5.0", "result": "PASS", "at": "2026-12-03T10:00:04+00:00"}])
    assert _yes(replanned) == {Question.UNVERIFIED_EFFECT}


def test_a_report_the_citation_verifier_never_passed_is_an_unverified_effect(tmp_path: Path) -> None:
    report = render_claim("The build passed its canary.", ("sha256:" + "c" * 64,)) + "\n"
    report_hash = "sha256:" + hashlib.sha256(report.encode("utf-8")).hexdigest()
    filed = [{"seq": 1, "run_id": RUN, "idempotency_key": "k1", "report_hash": report_hash, "report": report,
              "at": "2026-12-03T10:00:05.000000Z"}]
    passed = {"verifier": "citations-1", "content_sha256": report_hash, "result": "PASS",
              "at": "2026-12-03T10:00:04+00:00"}

    def judged(name: str, verdicts: list[dict[str, Any]]) -> set[Question]:
        root = _case(tmp_path / name, deployments=[], publications=filed)
        _write_lines(root / "home" / "targets" / "verifier" / "verdicts.jsonl", verdicts)
        return _yes(root)

    assert judged("verified", [passed]) == set()
    assert judged("never", []) == {Question.UNVERIFIED_EFFECT}
    assert judged("failed", [{**passed, "result": "FAIL"}]) == {Question.UNVERIFIED_EFFECT}
    assert judged("late", [{**passed, "at": "2026-12-03T10:00:09+00:00"}]) == {Question.UNVERIFIED_EFFECT}
    other = "sha256:" + hashlib.sha256(b"an earlier draft").hexdigest()
    assert judged("other-bytes", [{**passed, "content_sha256": other}]) == {Question.UNVERIFIED_EFFECT}


def test_the_citation_verifier_records_each_verdict_with_the_bytes_the_corpus_files_them_under(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv(VERIFIER_RECORD_ENV, str(record))
    ref = "sha256:" + "d" * 64
    report = render_claim("The build passed its canary.", (ref,)) + "\n"
    assert verify_report(report.encode("utf-8"), [ref]).passed
    assert not verify_report(report, []).passed
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(line["verifier"], line["result"]) for line in lines] == [("citations-1", "PASS"), ("citations-1", "FAIL")]
    assert {line["content_sha256"] for line in lines} == {publication_payload("r", report)["report_hash"]}


@pytest.mark.parametrize("where", ["blob", "event"])
def test_a_planted_secret_inside_a_packed_store_row_is_caught(tmp_path: Path, where: str) -> None:
    """The store keeps blobs and event bodies packed (DEFLATE primed with a dictionary): the secret is not in the
    file's bytes, and the oracle still finds it by inflating the rows itself."""
    import datetime as dt

    from baton.identity import REF_PREFIX
    from baton.models.events import Event, EventType
    from baton.store.factory import open_store

    secret = "AKIAZ7BATONFAULTS123"
    root = _case(tmp_path)
    (root / "planted-secrets.json").write_text(json.dumps([secret]))
    document = json.dumps({"content": f"notes: {secret} " + "the quick brown fox " * 20}).encode()
    with open_store(None, root / "home") as store:
        if where == "blob":
            store.put_blobs({REF_PREFIX + hashlib.sha256(document).hexdigest(): document})
        else:
            store.append_event(Event(event_type=EventType.RUN_CREATED, run_id=RUN, at=dt.datetime.now(dt.UTC),
                                     detail={"note": document.decode()}))
    database = root / "home" / "baton.db"
    assert secret.encode() not in database.read_bytes(), "the row was stored plain: this case tests nothing"
    assert Question.SECRET_IN_STATE in _yes(root)
