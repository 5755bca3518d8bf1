"""The deploy service as a real process: fencing, idempotency, ambiguity, records."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest

from baton.agents.scripted_models import BuildInfo, model_for
from baton.errors import TargetRejectedError, TargetUnavailableError
from baton.fencing import FencingToken
from baton.identity import sha256_ref
from baton.models import OperationState
from baton.targets.deploy_service import DEPLOYMENTS_FILE, DeployClient, count_side_effects, read_effects
from baton.targets.service_process import ServiceProcess

pytestmark = pytest.mark.integration

ARTIFACT = sha256_ref(b"checkout build 1.4.2")


def payload(version: str = "1.4.2") -> dict[str, str]:
    return {"service": "checkout", "version": version, "artifact_hash": ARTIFACT}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def headers(operation_id: str, key: str, run_id: str, epoch: int) -> dict[str, str]:
    return {
        "X-Operation-Id": operation_id,
        "Idempotency-Key": key,
        "X-Fencing-Run": run_id,
        "X-Fencing-Epoch": str(epoch),
    }


def lines(data_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (data_dir / DEPLOYMENTS_FILE).read_text().splitlines()]


def test_a_deployment_is_recorded_in_the_documented_format(deploy_service: ServiceProcess, deploy_client: DeployClient) -> None:
    run, key, op = unique("run"), unique("key"), unique("op")
    answer = deploy_client.apply(op, key, FencingToken(run, 1), payload())
    assert answer["status"] == "applied"
    record = next(line for line in lines(deploy_service.data_dir) if line["idempotency_key"] == key)
    assert set(record) == {
        "seq", "operation_id", "idempotency_key", "run_id", "epoch", "service", "version", "artifact_hash", "strategy", "at",
    }
    assert (record["operation_id"], record["run_id"], record["epoch"]) == (op, run, 1)
    assert record["artifact_hash"] == ARTIFACT
    assert deploy_client.lookup(op) is OperationState.COMMITTED


def test_same_key_and_body_replays_without_a_second_deployment(
    deploy_service: ServiceProcess, deploy_client: DeployClient
) -> None:
    run, key = unique("run"), unique("key")
    first = deploy_client.apply(unique("op"), key, FencingToken(run, 1), payload())
    second = deploy_client.apply(unique("op"), key, FencingToken(run, 1), payload())
    assert (first["status"], second["status"]) == ("applied", "replayed")
    assert second["record"] == first["record"]
    assert count_side_effects(deploy_service.data_dir)["per_key"][key] == 1


def test_same_key_with_another_body_is_422(deploy_service: ServiceProcess, deploy_client: DeployClient) -> None:
    run, key = unique("run"), unique("key")
    deploy_client.apply(unique("op"), key, FencingToken(run, 1), payload("1.4.2"))
    response = httpx.post(
        deploy_service.url + "/deployments", json=payload("1.5.0"), headers=headers(unique("op"), key, run, 1)
    )
    assert response.status_code == 422
    assert response.json()["error"] == "payload_mismatch"
    with pytest.raises(TargetRejectedError) as refused:
        deploy_client.apply(unique("op"), key, FencingToken(run, 1), payload("1.5.0"))
    assert refused.value.reason == "payload_mismatch" and not refused.value.fenced
    assert count_side_effects(deploy_service.data_dir)["per_key"][key] == 1


def test_a_lower_epoch_is_refused_with_409(deploy_service: ServiceProcess, deploy_client: DeployClient) -> None:
    run = unique("run")
    deploy_client.apply(unique("op"), unique("key"), FencingToken(run, 5), payload())
    response = httpx.post(
        deploy_service.url + "/deployments", json=payload(), headers=headers(unique("op"), unique("key"), run, 4)
    )
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "fenced" and body["highest_epoch"] == 5 and body["epoch"] == 4
    with pytest.raises(TargetRejectedError) as refused:
        deploy_client.apply(unique("op"), unique("key"), FencingToken(run, 4), payload())
    assert refused.value.fenced
    # The current epoch itself still passes.
    assert deploy_client.apply(unique("op"), unique("key"), FencingToken(run, 5), payload())["status"] == "applied"
    assert sum(1 for line in lines(deploy_service.data_dir) if line["run_id"] == run) == 2


def test_advancing_the_fence_locks_out_the_old_epoch(deploy_client: DeployClient) -> None:
    run = unique("run")
    assert deploy_client.advance_fence(FencingToken(run, 7)) == 7
    with pytest.raises(TargetRejectedError) as refused:
        deploy_client.apply(unique("op"), unique("key"), FencingToken(run, 6), payload())
    assert refused.value.fenced


def test_an_unknown_operation_is_not_committed_and_stays_so(deploy_client: DeployClient) -> None:
    op = unique("op")
    assert deploy_client.lookup(op) is OperationState.NOT_COMMITTED
    with pytest.raises(TargetRejectedError) as refused:
        deploy_client.apply(op, unique("key"), FencingToken(unique("run"), 0), payload())
    assert refused.value.reason == "sealed"
    assert deploy_client.lookup(op) is OperationState.NOT_COMMITTED


def test_missing_headers_are_refused(deploy_service: ServiceProcess) -> None:
    response = httpx.post(deploy_service.url + "/deployments", json=payload(), headers={"Idempotency-Key": "k"})
    assert response.status_code == 400 and response.json()["error"] == "bad_headers"


def test_a_planned_spec_is_a_valid_payload(deploy_service: ServiceProcess, deploy_client: DeployClient) -> None:
    builds = [BuildInfo(version="2.0.0", artifact_hash=ARTIFACT, canary_passed=True)]
    spec = model_for("model-v7").plan_deployment("checkout", builds).output
    answer = deploy_client.apply(unique("op"), unique("key"), FencingToken(unique("run"), 0), spec)
    assert answer["record"]["version"] == "2.0.0" and answer["record"]["strategy"] == "rolling"
    listed = deploy_client.deployments()
    assert any(item["operation_id"] == answer["record"]["operation_id"] for item in listed)


def test_fences_and_keys_survive_a_restart(tmp_path: Path) -> None:
    service = ServiceProcess.deploy(tmp_path / "deploy").start()
    try:
        with DeployClient(service.url) as client:
            client.apply("op-1", "key-1", FencingToken("run-r", 3), payload())
        service.restart()
        with DeployClient(service.url) as client:
            response = httpx.post(
                service.url + "/deployments", json=payload(), headers=headers("op-2", "key-2", "run-r", 2)
            )
            assert response.status_code == 409 and response.json()["highest_epoch"] == 3
            assert client.apply("op-3", "key-1", FencingToken("run-r", 3), payload())["status"] == "replayed"
            assert client.lookup("op-1") is OperationState.COMMITTED
            assert client.lookup("op-3") is OperationState.COMMITTED
    finally:
        service.stop()
    assert count_side_effects(tmp_path / "deploy") == {
        "file": DEPLOYMENTS_FILE, "total": 1, "per_key": {"key-1": 1}, "duplicates": {},
    }
    assert [(e.run_id, e.idempotency_key, e.epoch) for e in read_effects(tmp_path / "deploy")] == [("run-r", "key-1", 3)]


def test_commit_then_timeout_is_reconciled_as_committed(tmp_path: Path) -> None:
    data = tmp_path / "deploy"
    with ServiceProcess.deploy(data, ambiguous_rate=1.0, seed=1, ambiguous_delay_s=4.0) as service:
        with DeployClient(service.url, timeout_s=0.5) as client:
            started = time.monotonic()
            with pytest.raises(TargetUnavailableError):
                client.apply("op-amb", "key-amb", FencingToken("run-a", 1), payload())
            assert time.monotonic() - started < 3.0  # gave up long before the answer came
            # The answer was lost, the commit was not: the target's own records say so.
            assert client.lookup("op-amb") is OperationState.COMMITTED
            assert count_side_effects(data)["per_key"] == {"key-amb": 1}
            # A retry under the same key resolves to the same deployment, at once.
            retry = client.apply("op-amb-2", "key-amb", FencingToken("run-a", 1), payload())
            assert retry["status"] == "replayed" and retry["record"]["operation_id"] == "op-amb"
    assert count_side_effects(data) == {"file": DEPLOYMENTS_FILE, "total": 1, "per_key": {"key-amb": 1}, "duplicates": {}}
