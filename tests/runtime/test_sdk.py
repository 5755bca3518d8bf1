"""The agent SDK in process: boundaries sealed, budget kept, evidence bound, secrets refused."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from baton.agents.verifiers import Verdict
from baton.errors import SecretInStateError, StaleEpochError
from baton.handoff.quiesce import QuiesceSignal
from baton.models import (
    AuthorityLevel,
    Boundary,
    BudgetLimits,
    BudgetUsage,
    Event,
    EventType,
    ResumabilityClass,
    VerdictResult,
)
from baton.runtime.errors import (
    BoundaryError,
    BudgetExhausted,
    HandoffRequested,
    ObservationNeedsRevalidation,
    RunFenced,
)
from baton.runtime.sdk import RunContext
from baton.runtime.services import RuntimeServices

from builders.runtime import TARGET, MemoryTarget, adopt, launch, make_services

SPEC = b'{"service":"checkout","version":"1.4.2"}'


def passing(data: bytes) -> Verdict:
    return Verdict(VerdictResult.PASS, f"{len(data)} bytes look right", "check-1")


@pytest.fixture
def target() -> MemoryTarget:
    return MemoryTarget()


@pytest.fixture
def services(tmp_path: Path, target: MemoryTarget) -> Iterator[RuntimeServices]:
    made = make_services(tmp_path, target)
    try:
        yield made
    finally:
        made.store.close()


@pytest.fixture
def ctx(services: RuntimeServices) -> RunContext:
    launch(services)
    return adopt(services)


def drive_to_authorized(ctx: RunContext) -> None:
    builds = ctx.observe("builds://checkout", {"service": "checkout"}, b"1.4.2 passed", freshness_s=300)
    ctx.propose(SPEC, kind="deployment-spec", inputs=[builds])
    ctx.verify(passing)
    ctx.request_approval("deploy", level=AuthorityLevel.EXTERNAL_MUTATE)


def test_every_boundary_seals_a_checkpoint_with_a_derived_class(ctx: RunContext, services: RuntimeServices,
                                                                 target: MemoryTarget) -> None:
    drive_to_authorized(ctx)
    ctx.perform("deploy", TARGET, {"spec": "v1"}, key="run-1:deploy")
    ctx.confirm_postcondition(True, "one deployment recorded")

    chain = services.store.list_checkpoints("run-1")
    assert [c.boundary for c in chain] == [
        Boundary.GENERATING,  # launched
        Boundary.GENERATING,  # observation completed
        Boundary.CANDIDATE_READY,
        Boundary.VERIFIED,
        Boundary.AWAITING_AUTHORITY,
        Boundary.AUTHORIZED,
        Boundary.COMMITTING,
        Boundary.COMMITTED,
        Boundary.POSTCONDITION_VERIFIED,
    ]
    assert all(child.parent_checkpoint_hash == parent.checkpoint_hash for parent, child in zip(chain, chain[1:]))
    by_boundary = {c.boundary: c for c in chain}
    assert by_boundary[Boundary.COMMITTING].resumability is ResumabilityClass.R5  # intent recorded before sending
    assert by_boundary[Boundary.AUTHORIZED].resumability is ResumabilityClass.R4
    assert by_boundary[Boundary.POSTCONDITION_VERIFIED].resumability is ResumabilityClass.R0
    assert len(target.effects) == 1
    sealed = services.store.list_events(run_id="run-1", event_types=[EventType.CHECKPOINT_SEALED])
    assert len(sealed) == len(chain)
    verified = services.store.list_events(run_id="run-1", event_types=[EventType.RESUME_VERIFIED])
    assert len(verified) == 1  # the first transition after adoption was checked


def test_evidence_binds_to_the_exact_candidate_hash(ctx: RunContext) -> None:
    seen: list[bytes] = []

    def recording(data: bytes) -> Verdict:
        seen.append(data)
        return passing(data)

    ctx.propose(b"candidate A", kind="report")
    first = ctx.verify(recording)
    assert seen == [b"candidate A"] and first.applies_to(ctx.candidate.artifact_hash)  # type: ignore[union-attr]

    ctx.withdraw_candidate("found a better one")
    ctx.propose(b"candidate B", kind="report")
    assert not first.applies_to(ctx.candidate.artifact_hash)  # type: ignore[union-attr]
    with pytest.raises(BoundaryError):
        ctx.request_approval("publish", level=AuthorityLevel.SANDBOX_MUTATE)  # B was never verified
    second = ctx.verify(recording)
    assert seen[-1] == b"candidate B" and second.candidate_hash != first.candidate_hash
    approval = ctx.request_approval("publish", level=AuthorityLevel.SANDBOX_MUTATE)
    assert approval.artifact_hash == second.candidate_hash


def test_a_failed_verification_goes_back_to_generating(ctx: RunContext) -> None:
    ctx.propose(b"bad", kind="report")
    evidence = ctx.verify(lambda data: Verdict(VerdictResult.FAIL, "uncited claim", "check-1"))
    assert not evidence.passed and ctx.boundary is Boundary.GENERATING and ctx.candidate is None


def test_budget_is_charged_to_the_run_and_never_reset_by_a_new_owner(ctx: RunContext, services: RuntimeServices) -> None:
    ctx.charge(BudgetUsage(model_calls=2, model_spend_usd=Decimal("0.25")), "two model calls")
    ctx.checkpoint()
    ctx.charge(BudgetUsage(model_calls=1, model_spend_usd=Decimal("0.10")), "spent after the last seal")
    before = ctx.budget.used  # the old owner dies here: its last charge is in no checkpoint

    successor = adopt(services, owner="worker:b", placement="cloud-eu")
    assert successor.epoch > ctx.epoch
    assert successor.budget.used.covers(before)
    assert successor.budget.used.model_calls == 3 and successor.budget.used.model_spend_usd == Decimal("0.35")
    successor.checkpoint()
    assert services.store.latest_checkpoint("run-1").owner_epoch == successor.epoch  # type: ignore[union-attr]


def _adopted_with_one_model_call(services: RuntimeServices) -> RunContext:
    """A run launched with a budget of one model call, adopted."""
    now = services.store.db_now()
    limits = BudgetLimits(model_spend_usd=Decimal("1"), model_calls=1, search_expansions=0, tool_calls=10,
                          browser_seconds=0, sandbox_seconds=0, verification_reserve_usd=Decimal("1"), retries=1,
                          deadline=now + dt.timedelta(hours=1))
    launch(services, limits=limits)
    return adopt(services)


def test_work_is_refused_once_the_budget_is_exhausted(services: RuntimeServices) -> None:
    ctx = _adopted_with_one_model_call(services)
    ctx.charge(BudgetUsage(model_calls=1), "first call (at the limit)")
    with pytest.raises(BudgetExhausted) as caught:
        ctx.charge(BudgetUsage(model_calls=1), "second call")
    assert caught.value.limits == ("model_calls",)
    with pytest.raises(BudgetExhausted):
        ctx.propose(b"anything", kind="report")
    assert services.store.budget_used("run-1").model_calls == 2  # spend is recorded even when it overruns


def test_a_secret_never_reaches_portable_state(ctx: RunContext, services: RuntimeServices) -> None:
    sealed = len(services.store.list_checkpoints("run-1"))
    with pytest.raises(SecretInStateError):
        ctx.observe("config://app", {}, b"aws_access_key_id = AKIAIOSFODNN7EXAMPLE", freshness_s=60)
    assert ctx.read("config://app") is None
    ctx.remember("note", "the db password = 'hunter2-correct-horse'")
    with pytest.raises(SecretInStateError):
        ctx.checkpoint()
    assert len(services.store.list_checkpoints("run-1")) == sealed


def test_a_stale_observation_is_not_used_until_revalidated(ctx: RunContext) -> None:
    observed = ctx.observe("corpus://leases", {"doc_id": "leases"}, b"Leases expire.", freshness_s=0.2)
    ctx.propose(b"report on leases", kind="report", inputs=[observed])
    time.sleep(0.3)
    with pytest.raises(ObservationNeedsRevalidation) as caught:
        ctx.read("corpus://leases", {"doc_id": "leases"})
    assert caught.value.mode.value == "REFRESH_STALE_OBSERVATION"
    with pytest.raises(ObservationNeedsRevalidation):
        ctx.verify(passing)  # the candidate rests on it, so it cannot be verified either

    assert ctx.revalidate(observed, b"Leases expire.") is False  # same content: still true
    assert observed.record_ref() in ctx.valid_observation_refs()
    assert ctx.boundary is Boundary.CANDIDATE_READY
    assert ctx.verify(passing).passed


def test_changed_content_withdraws_the_candidate_built_on_it(ctx: RunContext, services: RuntimeServices) -> None:
    observed = ctx.observe("corpus://fencing", {"doc_id": "fencing"}, b"Old text.", freshness_s=0.2)
    ctx.derive("doc:fencing", "Old text.", from_=[observed])
    ctx.propose(b"report citing the old text", kind="report", inputs=[observed])
    time.sleep(0.3)
    assert ctx.revalidate(observed, b"New text.") is True
    assert ctx.boundary is Boundary.GENERATING and ctx.candidate is None
    assert observed.record_ref() not in ctx.valid_observation_refs()
    assert ctx.derived_facts == ()
    reasons = [e.reason for _, e in services.store.list_events(run_id="run-1",
                                                               event_types=[EventType.REVERIFICATION_REQUIRED])]
    assert any("changed on revalidation" in (r or "") for r in reasons)
    current = ctx.read("corpus://fencing", {"doc_id": "fencing"})
    assert current is not None and current.content == b"New text."


def test_a_pending_handoff_is_acknowledged_at_the_next_boundary(ctx: RunContext, services: RuntimeServices) -> None:
    store = services.store
    seq = store.append_event(Event(event_type=EventType.HANDOFF_REQUESTED, run_id="run-1", at=store.db_now(),
                                   reason="scheduler_rebalance"))
    with pytest.raises(HandoffRequested) as caught:
        ctx.observe("builds://checkout", {"service": "checkout"}, b"builds", freshness_s=60)
    assert caught.value.signal == QuiesceSignal("run-1", seq, "scheduler_rebalance")
    (_, quiesced), = store.list_events(run_id="run-1", event_types=[EventType.SOURCE_QUIESCED])
    assert quiesced.detail["request_seq"] == seq
    assert quiesced.checkpoint_id == store.latest_checkpoint("run-1").checkpoint_id  # type: ignore[union-attr]


def test_a_fenced_owner_cannot_seal_or_perform(ctx: RunContext, services: RuntimeServices, target: MemoryTarget) -> None:
    drive_to_authorized(ctx)
    adopt(services, owner="worker:b", placement="cloud-eu")  # takes a higher epoch
    with pytest.raises(RunFenced):
        ctx.perform("deploy", TARGET, {"spec": "v1"}, key="run-1:deploy")
    assert target.effects == []


def test_an_ambiguous_commit_is_reconciled_not_retried(ctx: RunContext, services: RuntimeServices,
                                                       target: MemoryTarget) -> None:
    drive_to_authorized(ctx)
    target.ambiguous.add("run-1:deploy")
    result = ctx.perform("deploy", TARGET, {"spec": "v1"}, key="run-1:deploy")
    assert ctx.boundary is Boundary.COMMITTED and result.operation_id
    assert len(target.effects) == 1
    reconciled = services.store.list_events(run_id="run-1", event_types=[EventType.OPERATION_RECONCILED])
    assert [e.detail["state"] for _, e in reconciled] == ["COMMITTED"]


def test_a_resumed_run_settles_a_commit_its_predecessor_left_open(ctx: RunContext, services: RuntimeServices,
                                                                   target: MemoryTarget) -> None:
    drive_to_authorized(ctx)
    target.ambiguous.add("run-1:deploy")
    services.reconciler = lambda process: _NoReconcile()  # type: ignore[method-assign]
    with pytest.raises(Exception):
        ctx.perform("deploy", TARGET, {"spec": "v1"}, key="run-1:deploy")  # dies with the outcome open
    del services.reconciler
    assert services.store.latest_checkpoint("run-1").boundary is Boundary.COMMITTING  # type: ignore[union-attr]

    services.reconciler("test").reconcile_run("run-1")  # what the worker does before the agent
    successor = adopt(services, owner="worker:b", placement="cloud-eu")
    assert successor.boundary is Boundary.COMMITTED
    assert successor.perform("deploy", TARGET, {"spec": "v1"}, key="run-1:deploy").replayed
    assert len(target.effects) == 1


class _NoReconcile:
    """A reconciler whose owner dies before it can ask the target."""

    def reconcile(self, operation_id: str) -> None:
        raise RuntimeError("worker died")


def test_a_dropped_observation_takes_its_claim_with_it(ctx: RunContext, services: RuntimeServices) -> None:
    kept = ctx.observe("corpus://leases", {"doc_id": "leases"}, b"Leases expire.", freshness_s=60)
    gone = ctx.observe("corpus://retired", {"doc_id": "retired"}, b"An old page.", freshness_s=60)
    ctx.derive("doc:retired", "An old page.", from_=[gone])
    ctx.propose(b"two claims", kind="report", inputs=[kept, gone])
    ctx.drop_observation(gone, "the corpus no longer serves it")
    assert ctx.boundary is Boundary.GENERATING and ctx.read("corpus://retired", {"doc_id": "retired"}) is None
    assert ctx.valid_observation_refs() == [kept.record_ref()] and ctx.derived_facts == ()
    redrafted = ctx.propose(b"one claim", kind="report", inputs=[kept])
    assert ctx.verify(passing).applies_to(redrafted.artifact_hash)


class _WorkerDied(BaseException):
    """The worker's process ends between the provider serving a call and the reply's charge."""


def test_a_model_call_is_accounted_before_it_is_made(ctx: RunContext, services: RuntimeServices) -> None:
    """A worker that dies after the provider served its call leaves the call on the run's ledger (the finding
    `bill` of the simulation: charging after the reply under-accounted such a call)."""
    served: list[str] = []  # the provider's own record, written as it serves

    def provider() -> BudgetUsage:
        served.append("call")
        raise _WorkerDied

    with pytest.raises(_WorkerDied):
        ctx.call_model(provider, "a call the worker never saw answered", cost=lambda usage: usage)
    successor = adopt(services, owner="worker:b", placement="cloud-eu")
    assert successor.budget.used.model_calls >= len(served) == 1


def test_a_model_call_settles_the_reply_spend_without_counting_the_call_twice(ctx: RunContext) -> None:
    reply = BudgetUsage(model_calls=1, model_spend_usd=Decimal("0.04"))
    assert ctx.call_model(lambda: reply, "one call", cost=lambda usage: usage) is reply
    assert ctx.budget.used.model_calls == 1 and ctx.budget.used.model_spend_usd == Decimal("0.04")


def test_no_model_call_is_made_once_the_call_budget_is_spent(services: RuntimeServices) -> None:
    ctx = _adopted_with_one_model_call(services)
    served: list[int] = []
    ctx.call_model(lambda: served.append(1) or BudgetUsage(model_calls=1), "first", cost=lambda usage: usage)
    with pytest.raises(BudgetExhausted):
        ctx.call_model(lambda: served.append(2) or BudgetUsage(model_calls=1), "second", cost=lambda usage: usage)
    assert served == [1]  # the provider never served the call past the limit


def test_a_fenced_worker_makes_no_model_call(ctx: RunContext, services: RuntimeServices) -> None:
    """A worker that has not yet noticed its lease is gone (a stalled one, woken) is refused by the store before
    the provider is called: the provider serves nothing for it."""
    adopt(services, owner="worker:b", placement="cloud-eu")  # the run moved under ctx, which has not noticed
    served: list[str] = []
    with pytest.raises(StaleEpochError):
        ctx.call_model(lambda: served.append("call") or BudgetUsage(model_calls=1), "late call", cost=lambda u: u)
    assert served == []


def test_a_run_quiesced_at_committing_for_a_move_that_aborts_goes_on_and_commits_once(
        ctx: RunContext, services: RuntimeServices, target: MemoryTarget) -> None:
    """Found by the simulation (seed 1544 of stop 30): the move's request was acknowledged at the COMMITTING seal,
    the move aborted, and the agent, which has no step at COMMITTING, failed the run. Now the run is settled as a
    new owner would settle it: nothing was sent, so it is back at AUTHORIZED and commits once (the target's record)."""
    drive_to_authorized(ctx)
    store = services.store
    store.append_event(Event(event_type=EventType.HANDOFF_REQUESTED, run_id="run-1", at=store.db_now(),
                             reason="scheduler_rebalance"))
    with pytest.raises(HandoffRequested):
        ctx.perform("deploy", TARGET, {"spec": "v1"}, key="run-1:deploy")
    assert ctx.boundary is Boundary.COMMITTING and target.effects == []
    ctx.carry_on_after_aborted_move()  # the coordinator aborted the move: the same owner goes on
    assert ctx.boundary is Boundary.AUTHORIZED
    ctx.perform("deploy", TARGET, {"spec": "v1"}, key="run-1:deploy")
    assert ctx.boundary is Boundary.COMMITTED and len(target.effects) == 1


def test_a_seal_s_events_measure_its_latency(ctx: RunContext, services: RuntimeServices) -> None:
    """CHECKPOINT_STARTED and CHECKPOINT_SEALED are what sec. 25's checkpoint latency is read from; stamped with one
    clock reading, every SDK seal measured 0 ms."""
    ctx.observe("builds://checkout", {"service": "checkout"}, b"1.4.2 passed", freshness_s=300)
    events = services.store.list_events(run_id="run-1", event_types=[EventType.CHECKPOINT_STARTED,
                                                                      EventType.CHECKPOINT_SEALED])
    started, sealed = (event for _, event in events[-2:])
    assert (started.event_type, sealed.event_type) == (EventType.CHECKPOINT_STARTED, EventType.CHECKPOINT_SEALED)
    assert sealed.at > started.at
