"""The lease-expiry sensor over a real Baton store: one handoff per lapsed epoch, none once it is launched.

A lapsed lease stays lapsed until a handoff lands, so the sensor leaves out the
run keys Dagster already launched; the run request executed in process moves
the run through the fleet's dispatch, and when the new reservation lapses too
(nobody adopted it) the next epoch raises a new handoff.
"""

from __future__ import annotations

from pathlib import Path

from dagster import DagsterInstance, SensorResult, build_sensor_context, instance_for_test

from baton.models import EventType
from baton.platform.sensor_decisions import LEASE_EXPIRED
from pipelines.jobs import handoff_job
from pipelines.resources import BatonResource
from sensors.baton_sensors import RUN_KEY_TAG, lease_expiry

from .platform_support import ResearchRun


def _tick(instance: DagsterInstance, cursor: str | None, home: Path) -> SensorResult:
    return lease_expiry(build_sensor_context(instance=instance, cursor=cursor,
                                             resources={"baton": BatonResource(home=str(home))}))


def _lapse(run: ResearchRun) -> None:
    deadline = run.store.get_lease(run.run_id).expires_at
    while run.store.db_now() <= deadline:  # the database clock decides, as the sensor's read does
        pass


def test_lease_expiry_raises_one_handoff_and_none_once_launched(home, store, blobs):
    lost = ResearchRun.launch(store, blobs, lease_ttl_s=0.2)
    ResearchRun.launch(store, blobs, lease_ttl_s=600.0)  # a live worker's run: left alone
    _lapse(lost)
    with instance_for_test() as instance:
        first = _tick(instance, None, home)
        (request,) = first.run_requests
        assert request.run_key == f"{LEASE_EXPIRED}:{lost.run_id}:{lost.epoch}"
        config = request.run_config["ops"]["hand_off"]["config"]
        assert (config["run"], config["reason"], config["source_alive"], config["allow_same_placement"]) == (
            lost.run_id, LEASE_EXPIRED, False, True)
        # What the daemon does with the request: a run carrying its run key.
        instance.create_run_for_job(handoff_job, run_config=request.run_config,
                                    tags={**request.tags, RUN_KEY_TAG: request.run_key})
        assert _tick(instance, first.cursor, home).run_requests == []
        assert _tick(instance, None, home).run_requests == []  # even from scratch: the launched key is known


def test_lease_expiry_handoff_runs_and_a_later_lapse_fires_again(home, store, blobs):
    from builders.live import live_targets

    lost = ResearchRun.launch(store, blobs, lease_ttl_s=0.2)
    lost.draft()
    _lapse(lost)
    with live_targets(home), instance_for_test() as instance:
        first = _tick(instance, None, home)
        (request,) = first.run_requests
        result = handoff_job.execute_in_process(instance=instance, run_config=request.run_config,
                                                tags={**request.tags, RUN_KEY_TAG: request.run_key},
                                                resources={"baton": BatonResource(home=str(home))})
        assert result.success
        assert instance.get_run_by_id(result.run_id).tags["baton/run"] == lost.run_id
        lease = store.get_lease(lost.run_id)
        assert lease.epoch == lost.epoch + 1 and lease.owner is not None and lease.owner.startswith("placement:")
        assert _tick(instance, first.cursor, home).run_requests == []  # reserved for a worker now
        while store.db_now() <= lease.expires_at:  # no worker adopts it: the reservation lapses
            pass
        (again,) = _tick(instance, first.cursor, home).run_requests
        assert again.run_key == f"{LEASE_EXPIRED}:{lost.run_id}:{lost.epoch + 1}"
    moved = store.list_events(run_id=lost.run_id, event_types=[EventType.OWNERSHIP_TRANSFERRED])
    assert [e.reason for _, e in moved] == [LEASE_EXPIRED]


def test_a_handoff_the_gate_refuses_fails_the_job_with_the_gates_reasons(home, any_store, blobs):
    from baton.catalog.changes import update_placement
    from builders.live import live_targets

    run = ResearchRun.launch(any_store, blobs)
    run.draft()
    update_placement(any_store, "cloud-eu", authority_ceiling="OBSERVE", reason="test")  # below the run's authority
    config = {"run": run.run_id, "reason": "test", "excluded_placements": ["cloud-us", "browser-pool-eu"]}
    with live_targets(home), instance_for_test() as instance:
        result = handoff_job.execute_in_process(instance=instance, raise_on_error=False,
                                                resources={"baton": BatonResource(home=str(home))},
                                                run_config={"ops": {"hand_off": {"config": config}}})
        assert not result.success
        assert instance.get_run_by_id(result.run_id).tags["baton/run"] == run.run_id
    failure = result.failure_data_for_node("hand_off")
    assert failure is not None and failure.user_failure_data is not None
    assert "no compatible target" in failure.user_failure_data.description
    assert "cloud-eu: authority_downgrade_forbidden" in failure.user_failure_data.description
    refusals = failure.user_failure_data.metadata["gate_refusals"].value
    assert "authority_downgrade_forbidden" in refusals["cloud-eu"]
    assert len(any_store.list_events(run_id=run.run_id, event_types=[EventType.HANDOFF_ABORTED])) == 1
    assert any_store.get_lease(run.run_id).epoch == run.epoch  # nothing moved
