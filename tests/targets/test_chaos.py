"""The chaos schedule: seeded, complete, and resolved into handoff requests at fire time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from baton.catalog.releases import RELEASES
from baton.chaos import ChaosReason, ChaosSchedule, affected_placements
from baton.placements import DEFAULT_PLACEMENTS, placement_named

RUNS = {f"run-{i:02d}": DEFAULT_PLACEMENTS[i % len(DEFAULT_PLACEMENTS)].name for i in range(12)}
V8 = RELEASES["model-v8"].release_id


def schedule(seed: int) -> ChaosSchedule:
    return ChaosSchedule.generate(seed, 60.0, DEFAULT_PLACEMENTS, RUNS)


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert schedule(1) == schedule(1)
    assert schedule(1).canonical() == schedule(1).canonical()
    shuffled = ChaosSchedule.generate(1, 60.0, tuple(reversed(DEFAULT_PLACEMENTS)), dict(reversed(RUNS.items())))
    assert shuffled == schedule(1)


def test_a_different_seed_gives_a_different_schedule() -> None:
    assert schedule(1).events != schedule(2).events


def test_every_reason_appears_and_only_a_reclaimed_gpu_kills() -> None:
    plan = schedule(1)
    assert plan.reasons == frozenset(ChaosReason)
    for event in plan.events:
        assert event.kill_worker == (event.reason is ChaosReason.GPU_RECLAIMED)
        assert event.source_placement not in event.preferred_targets or event.reason is ChaosReason.BETTER_MODEL_RELEASED
        assert not set(event.affected) & set(event.preferred_targets)
        assert 0 <= event.at_s <= plan.duration_s
    assert [event.at_s for event in plan.events] == sorted(event.at_s for event in plan.events)
    assert len({event.event_id for event in plan.events}) == len(plan.events)
    assert plan.due(0.0, plan.duration_s) == plan.events
    assert plan.due(0.0, 20.0) + plan.due(20.0, plan.duration_s) == plan.events


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**31))
def test_each_applicable_reason_is_scheduled_early_for_any_seed(seed: int) -> None:
    plan = schedule(seed)
    assert plan.reasons == frozenset(ChaosReason)
    for reason in ChaosReason:
        first = min(event.at_s for event in plan.events if event.reason is reason)
        assert first <= plan.duration_s / 2
        source = placement_named(DEFAULT_PLACEMENTS, next(e for e in plan.events if e.reason is reason).source_placement)
        if reason is ChaosReason.GPU_RECLAIMED:
            assert source.accelerator.startswith("gpu")
        if reason is ChaosReason.BROWSER_POOL_DRAINED:
            assert "browser" in source.tools


def test_reasons_that_do_not_apply_are_left_out() -> None:
    cpu_only = [p for p in DEFAULT_PLACEMENTS if not p.accelerator.startswith("gpu") and "browser" not in p.tools]
    cpu_only += [DEFAULT_PLACEMENTS[3].model_copy(update={"name": "cpu-eu", "tools": ("python",)})]
    runs = {"run-a": cpu_only[0].name, "run-b": cpu_only[1].name}
    plan = ChaosSchedule.generate(3, 10.0, cpu_only, runs)
    assert ChaosReason.GPU_RECLAIMED not in plan.reasons and ChaosReason.BROWSER_POOL_DRAINED not in plan.reasons
    assert ChaosReason.SCHEDULER_REBALANCE in plan.reasons
    assert ChaosSchedule.generate(3, 10.0, DEFAULT_PLACEMENTS, {}).events == ()


def test_runs_already_on_the_better_release_are_not_upgraded() -> None:
    from baton.chaos import ChaosRun

    runs = [ChaosRun(run_id="r1", placement="cloud-us", release_id=V8)]
    plan = ChaosSchedule.generate(5, 10.0, DEFAULT_PLACEMENTS, runs)
    assert ChaosReason.BETTER_MODEL_RELEASED not in plan.reasons


def test_events_resolve_into_handoff_requests_for_the_runs_present_at_fire_time() -> None:
    plan = schedule(1)
    region = next(event for event in plan.events if event.reason is ChaosReason.REGION_CAPACITY_LOST)
    requests = region.requests(RUNS)
    assert {r.run_id for r in requests} == {run for run, where in RUNS.items() if where in region.affected}
    for request in requests:
        assert request.reason is ChaosReason.REGION_CAPACITY_LOST and request.at == region.at_s
        assert request.source_placement in region.affected and not request.kill_worker
        assert request.source_placement not in request.preferred_targets
    gpu = next(event for event in plan.events if event.reason is ChaosReason.GPU_RECLAIMED)
    assert all(r.kill_worker for r in gpu.requests(RUNS)) and gpu.requests(RUNS)
    assert gpu.requests({}) == ()
    upgrade = next(event for event in plan.events if event.reason is ChaosReason.BETTER_MODEL_RELEASED)
    (request,) = upgrade.requests(RUNS)
    assert request.run_id == upgrade.run_id and request.target_release_id == V8
    assert all(V8 in placement_named(DEFAULT_PLACEMENTS, name).supported_release_ids for name in request.preferred_targets)
    # The chosen run has finished: another run on the same placement moves instead.
    others = {run: where for run, where in RUNS.items() if run != upgrade.run_id}
    (fallback,) = upgrade.requests(others)
    assert fallback.run_id != upgrade.run_id and fallback.source_placement == upgrade.source_placement


def test_affected_placements_follow_provider_and_region() -> None:
    local = placement_named(DEFAULT_PLACEMENTS, "local-gpu-eu")
    assert affected_placements(ChaosReason.PROVIDER_UNHEALTHY, local, DEFAULT_PLACEMENTS) == ("browser-pool-eu", "local-gpu-eu")
    assert affected_placements(ChaosReason.REGION_CAPACITY_LOST, local, DEFAULT_PLACEMENTS) == ("local-gpu-eu",)
    cloud = placement_named(DEFAULT_PLACEMENTS, "cloud-eu")
    assert affected_placements(ChaosReason.REGION_CAPACITY_LOST, cloud, DEFAULT_PLACEMENTS) == ("browser-pool-eu", "cloud-eu")
    assert affected_placements(ChaosReason.PROVIDER_UNHEALTHY, cloud, DEFAULT_PLACEMENTS) == ("cloud-eu", "cloud-us")
    assert affected_placements(ChaosReason.GPU_RECLAIMED, local, DEFAULT_PLACEMENTS) == ("local-gpu-eu",)
    assert affected_placements(ChaosReason.SCHEDULER_REBALANCE, local, DEFAULT_PLACEMENTS) == ()
