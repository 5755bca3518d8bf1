"""Issue 13 (the simulation's seed 162): a worker adopting a reservation judges its placement, as the store's catalog
has it now, with the handoff gate, and gives back a run the placement can no longer host; the coordinator then
places it where it can run."""

from __future__ import annotations

from baton.authority import AuthorityService
from baton.catalog.changes import current_placements, update_placement
from baton.catalog.releases import RELEASES
from baton.compat import GateReason, HandoffDecision
from baton.gateway import MutationGateway
from baton.handoff import HandoffCoordinator, HandoffRequest
from baton.models import AuthorityLevel, EventType, RunKind
from baton.placements import placement_named
from baton.runtime.executor import RunExecutor
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.services import RuntimeServices
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.runtime import MemoryTarget

HERE, ELSEWHERE = "cloud-eu", "local-gpu-eu"


def test_a_reservation_on_a_placement_that_lost_the_verifier_is_given_back_not_run(
    store: SqlStore, blobs: BlobStore, authority: AuthorityService
) -> None:
    target = MemoryTarget()
    started_on = placement_named(current_placements(store), HERE)  # the worker's copy, read when it started
    ran: list[str] = []
    services = RuntimeServices(store=store, blobs=blobs, authority=authority,
                               gateway=MutationGateway(store, authority, {target.name: target}),
                               targets={target.name: target}, releases={})
    executor = RunExecutor(services, started_on, "worker:w1", agent_for=lambda kind: lambda ctx: ran.append(ctx.run_id),
                           lease_ttl_s=30.0, fence_targets=[target])
    spec = RunSpec("run-162", RunKind.RESEARCH, RELEASES["model-v7"], started_on, "summarise", {"topic": "keys"},
                   AuthorityLevel.SANDBOX_MUTATE)
    launch_run(store, blobs, spec, reservation_ttl_s=30.0)
    update_placement(store, HERE, verifiers=["citations-1"], actor="operator")  # before the worker adopts

    won = executor.adopt("run-162", store.get_lease("run-162"))
    assert won is not None
    outcome = executor.execute(won)
    assert (outcome.result, ran, target.effects) == ("refused", [], [])  # the agent never ran here
    assert "verifier_unavailable" in outcome.detail
    refused = [e for _, e in store.list_events(run_id="run-162", event_types=[EventType.COMPATIBILITY_FAILED])]
    assert [(e.reason, e.target_placement) for e in refused] == [("placement cannot host the run at adoption", HERE)]
    assert GateReason.VERIFIER_UNAVAILABLE in HandoffDecision.model_validate(refused[0].compatibility_decision).reasons
    lease = store.get_lease("run-162")
    assert (lease.owner, lease.epoch, store.get_run("run-162").status) == (None, won.epoch, "active")

    # Given back, the run is placed again by the coordinator, reading the catalog as it is now.
    coordinator = HandoffCoordinator(store, blobs, {p.name: p for p in current_placements(store)
                                                    if p.name in (HERE, ELSEWHERE)}, fence_targets=[target])
    moved = coordinator.handoff(HandoffRequest("run-162", "lease_expired", source_alive=False,
                                               allow_same_placement=True))
    assert moved.committed and moved.target_placement == ELSEWHERE
    assert target.fences["run-162"] == moved.target_epoch  # the target's own record of the fence
