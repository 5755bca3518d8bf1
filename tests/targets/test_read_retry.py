"""A lost answer to a read is asked again; a lost answer to a mutation never is (it goes to reconciliation)."""

from __future__ import annotations

import httpx
import pytest

from baton.errors import TargetUnavailableError
from baton.fencing import FencingToken
from baton.models import RunKind
from baton.sim.faults import Fault, FaultPlan
from baton.sim.runner import config_for
from baton.sim.world import SimRecords, run_world
from baton.targets.deploy_service import DeployClient
from baton.read_retry import READ_ATTEMPTS


def _client(answers: list[object], seen: list[str]) -> DeployClient:
    """A deploy client whose network gives `answers` in turn: an exception to raise, or a status to answer."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, int)
        return httpx.Response(answer, json=[] if answer == 200 else {"error": "busy"})

    return DeployClient("http://deploy.test", transport=httpx.MockTransport(handle))


def test_a_read_whose_answer_was_lost_is_asked_again() -> None:
    seen: list[str] = []
    client = _client([httpx.ReadTimeout("lost"), httpx.ConnectError("refused"), 200], seen)
    assert client.deployments() == []
    assert seen == ["GET /deployments"] * 3


def test_a_briefly_unavailable_service_is_asked_again() -> None:
    seen: list[str] = []
    assert _client([503, 200], seen).deployments() == []
    assert len(seen) == 2


def test_a_read_gives_up_after_its_attempts() -> None:
    seen: list[str] = []
    client = _client([httpx.ReadTimeout("lost")] * READ_ATTEMPTS, seen)
    with pytest.raises(httpx.ReadTimeout):
        client.deployments()
    assert len(seen) == READ_ATTEMPTS


def test_a_mutation_whose_answer_was_lost_is_not_sent_again() -> None:
    seen: list[str] = []
    client = _client([httpx.ReadTimeout("lost"), 201], seen)
    token = FencingToken(run_id="run-1", epoch=1)
    with pytest.raises(TargetUnavailableError, match="no answer in time"):
        client.apply("op-1", "run-1:deploy:k", token, {"service": "checkout", "version": "1.0.0",
                                                       "artifact_hash": "sha256:" + "0" * 64, "strategy": "canary"})
    assert seen == ["POST /deployments"]


def test_a_simulated_deploy_run_survives_a_lost_postcondition_read() -> None:
    """Seed 0, fault-free, shows where the run reads the deployments back; losing that request must not fail it."""
    reads: list[int] = []

    def look(records: SimRecords) -> None:
        reads.extend(m.seq for m in records.network.messages if m.method == "GET" and m.path == "/deployments")

    run_world(config_for(0, 0, plan=FaultPlan(), kinds=(RunKind.DEPLOY,)), before_check=look)
    assert reads, "the deploy agent reads the service's deployments back for its postcondition"
    lost = Fault("drop_request", reads[0])
    asked: list[int] = []

    def again(records: SimRecords) -> None:
        asked.extend(m.seq for m in records.network.messages if m.method == "GET" and m.path == "/deployments")

    outcome = run_world(config_for(0, 0, plan=FaultPlan((lost,)), kinds=(RunKind.DEPLOY,)), before_check=again)
    assert lost in outcome.fired
    assert outcome.statuses == {"sim0-deploy-0": "verified"} and not outcome.violations
    assert len(asked) == 2  # the lost read, then the one asked again


def test_retry_read_refuses_zero_attempts_and_returns_the_last_answer() -> None:
    from baton.read_retry import retry_read

    with pytest.raises(ValueError, match="attempts must be at least 1"):
        retry_read(lambda: 1, (OSError,), attempts=0)
    answers = iter([503, 503, 503])
    assert retry_read(lambda: next(answers), (OSError,), again=lambda status: status == 503) == 503
