"""The corpus service as a real process: documents that change, publications, records."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest

from baton.errors import TargetRejectedError
from baton.fencing import FencingToken
from baton.identity import sha256_ref
from baton.models import OperationState, SourceAuthority
from baton.targets.corpus_documents import DOCUMENTS_FILE, INITIAL_DOCUMENTS
from baton.targets.corpus_service import (
    PUBLICATIONS_FILE,
    CorpusClient,
    DocumentNotFoundError,
    count_side_effects,
    publication_payload,
)
from baton.targets.service_process import ServiceProcess

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_a_fetch_carries_text_version_and_content_hash(corpus_client: CorpusClient) -> None:
    fetched = corpus_client.fetch("fencing")
    assert fetched.data == INITIAL_DOCUMENTS["fencing"].encode()
    assert fetched.content_hash == sha256_ref(fetched.data)
    assert fetched.version >= 1 and fetched.served_at.tzinfo is not None
    observation = fetched.observation(freshness_budget_s=30)
    assert observation.source == "corpus://fencing" and observation.query == {"doc_id": "fencing"}
    assert observation.content_ref == fetched.content_hash and observation.authority is SourceAuthority.AUTHORITATIVE
    listed = {item["id"]: item for item in corpus_client.list_documents()}
    assert set(INITIAL_DOCUMENTS) <= set(listed)


def test_changing_a_document_makes_a_new_version_with_a_new_hash(
    corpus_service: ServiceProcess, corpus_client: CorpusClient
) -> None:
    before = corpus_client.fetch("leases")
    changed = corpus_client.change_document("leases", before.data.decode() + " A new rule applies from today.")
    after = corpus_client.fetch("leases")
    assert changed["changed"] and after.version == before.version + 1
    assert after.content_hash != before.content_hash
    assert corpus_client.fetch("leases", version=before.version).content_hash == before.content_hash
    assert not corpus_client.change_document("leases", after.data.decode())["changed"]
    history = json.loads((corpus_service.data_dir / DOCUMENTS_FILE).read_text())["documents"]["leases"]
    assert [entry["version"] for entry in history][-2:] == [before.version, after.version]
    assert history[-1]["content_hash"] == sha256_ref(history[-1]["text"].encode()) and history[-1]["cause"] == "admin"


def test_an_unknown_document_is_not_found(corpus_client: CorpusClient) -> None:
    with pytest.raises(DocumentNotFoundError):
        corpus_client.fetch("no-such-document")
    with pytest.raises(DocumentNotFoundError):
        corpus_client.fetch("fencing", version=999)


def test_publishing_is_fenced_idempotent_and_recorded(corpus_service: ServiceProcess, corpus_client: CorpusClient) -> None:
    run, key, op = unique("run"), unique("key"), unique("op")
    report = "# Report\n- Targets refuse old tokens. [cite: sha256:" + "0" * 64 + "]\n"
    stored = corpus_client.apply(op, key, FencingToken(run, 2), publication_payload(run, report))
    replay = corpus_client.apply(unique("op"), key, FencingToken(run, 2), publication_payload(run, report))
    assert (stored["status"], replay["status"]) == ("applied", "replayed")
    assert corpus_client.lookup(op) is OperationState.COMMITTED
    with pytest.raises(TargetRejectedError) as fenced:
        corpus_client.apply(unique("op"), unique("key"), FencingToken(run, 1), publication_payload(run, report))
    assert fenced.value.fenced
    with pytest.raises(TargetRejectedError) as mismatch:
        corpus_client.apply(unique("op"), key, FencingToken(run, 2), publication_payload(run, report + "more\n"))
    assert mismatch.value.reason == "payload_mismatch"
    lines = [json.loads(line) for line in (corpus_service.data_dir / PUBLICATIONS_FILE).read_text().splitlines()]
    mine = [line for line in lines if line["idempotency_key"] == key]
    assert len(mine) == 1 and mine[0]["report"] == report and mine[0]["report_hash"] == sha256_ref(report.encode())
    assert count_side_effects(corpus_service.data_dir)["per_key"][key] == 1
    assert any(item["operation_id"] == op for item in corpus_client.publications())


def test_a_publication_must_match_its_hash_and_its_run(corpus_service: ServiceProcess) -> None:
    run = unique("run")
    base = {"X-Operation-Id": unique("op"), "Idempotency-Key": unique("key"), "X-Fencing-Run": run, "X-Fencing-Epoch": "0"}
    wrong_hash = {"run_id": run, "report_hash": sha256_ref(b"other"), "report": "text"}
    response = httpx.post(corpus_service.url + "/publications", json=wrong_hash, headers=base)
    assert response.status_code == 422 and response.json()["error"] == "report_hash_mismatch"
    wrong_run = publication_payload("someone-else", "text")
    response = httpx.post(corpus_service.url + "/publications", json=wrong_run, headers=base)
    assert response.status_code == 422 and response.json()["error"] == "run_mismatch"


def test_documents_drift_on_a_seeded_schedule(tmp_path: Path) -> None:
    with ServiceProcess.corpus(tmp_path / "corpus", seed=4, drift_every_s=0.1) as service:
        with CorpusClient(service.url) as client:
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                if any(item["version"] > 1 for item in client.list_documents()):
                    break
                time.sleep(0.05)
    documents = json.loads((tmp_path / "corpus" / DOCUMENTS_FILE).read_text())["documents"]
    causes = [entry["cause"] for history in documents.values() for entry in history]
    assert "drift" in causes


def test_a_research_round_trip_and_a_revalidation_that_sees_the_change(
    corpus_service: ServiceProcess, corpus_client: CorpusClient
) -> None:
    from baton.agents.scripted_models import model_for
    from baton.agents.verifiers import verify_report

    fetched = [corpus_client.fetch(doc_id) for doc_id in ("idempotency", "reconciliation")]
    recorded = [(doc.observation(freshness_budget_s=60), doc.data) for doc in fetched]
    reply = model_for("model-v8").draft_report(recorded, topic="safe retries")
    assert verify_report(reply.output, {obs.record_ref() for obs, _ in recorded}).passed
    # The ground moves under the run: revalidating by content hash notices.
    corpus_client.change_document("reconciliation", fetched[1].data.decode() + " Escalate after three attempts.")
    assert corpus_client.fetch("reconciliation").content_hash != recorded[1][0].content_ref
    assert corpus_client.fetch("idempotency").content_hash == recorded[0][0].content_ref
    run = unique("run")
    answer = corpus_client.apply(unique("op"), unique("key"), FencingToken(run, 0), publication_payload(run, reply.output))
    assert answer["record"]["report_hash"] == sha256_ref(reply.output)
