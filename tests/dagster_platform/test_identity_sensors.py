"""The release- and environment-change sensors, ticked with build_sensor_context over a real Baton store.

Each change in the catalog (made through the catalog's own calls, as chaos and
the CLI do) raises exactly the expected `handoff_job` requests, a second tick
from the returned cursor raises none, and a change that goes A -> B -> A raises
its jobs each time (distinct run keys: the daemon would drop a repeated one).
"""

from __future__ import annotations

from pathlib import Path

from dagster import DagsterInstance, RunRequest, SensorResult, build_sensor_context, instance_for_test

from baton.catalog.changes import publish_release, update_placement, withdraw_release
from baton.catalog.releases import BETTER_RELEASE, OLDER_RELEASE, RELEASES
from baton.platform.sensor_decisions import ENVIRONMENT_CHANGED, RELEASE_PUBLISHED, RELEASE_WITHDRAWN
from pipelines.resources import BatonResource
from sensors.baton_sensors import environment_change, release_change

from .platform_support import PLACEMENTS, ResearchRun

OLDER, BETTER = RELEASES[OLDER_RELEASE], RELEASES[BETTER_RELEASE]


def _tick(sensor, instance: DagsterInstance, cursor: str | None, home: Path) -> SensorResult:  # type: ignore[no-untyped-def]
    return sensor(build_sensor_context(instance=instance, cursor=cursor,
                                       resources={"baton": BatonResource(home=str(home))}))


def _handoff(request: RunRequest) -> dict[str, object]:
    assert request.job_name == "handoff_job"
    return request.run_config["ops"]["hand_off"]["config"]


def test_release_sensor_hands_off_the_runs_of_a_withdrawn_release_only(home, store, blobs):
    pinned = ResearchRun.launch(store, blobs)  # on model-v7, the older release
    assert pinned.parts.release.release_id == OLDER.release_id
    with instance_for_test() as instance:
        quiet = _tick(release_change, instance, None, home)
        assert quiet.run_requests == []  # the catalog's seed is not a change
        withdraw_release(store, BETTER.release_id, reason="test")  # no run is pinned to it
        unrelated = _tick(release_change, instance, quiet.cursor, home)
        assert unrelated.run_requests == [] and int(unrelated.cursor) > int(quiet.cursor)
        cursor = unrelated.cursor
        change = withdraw_release(store, OLDER.release_id, reason="test")
        first = _tick(release_change, instance, cursor, home)
        (request,) = first.run_requests
        config = _handoff(request)
        assert (config["run"], config["reason"]) == (pinned.run_id, RELEASE_WITHDRAWN)
        assert request.run_key == f"{RELEASE_WITHDRAWN}:{change.seq}:{pinned.run_id}:{OLDER.release_id}"
        assert request.tags["baton/run"] == pinned.run_id
        assert _tick(release_change, instance, first.cursor, home).run_requests == []


def test_release_sensor_moves_runs_to_a_newer_release_the_policy_allows_each_time_it_is_published(home, store, blobs):
    pinned = ResearchRun.launch(store, blobs)
    with instance_for_test() as instance:
        cursor = _tick(release_change, instance, None, home).cursor
        keys = []
        for _ in range(2):  # published, withdrawn, published again: A -> B -> A
            withdraw_release(store, BETTER.release_id, reason="test")
            publish_release(store, BETTER.release_id, placements=["cloud-us"], reason="test")
            tick = _tick(release_change, instance, cursor, home)
            (request,) = tick.run_requests
            config = _handoff(request)
            assert (config["run"], config["reason"]) == (pinned.run_id, RELEASE_PUBLISHED)
            # Off every placement that still runs the older release, as the fleet's chaos moves do.
            assert "local-gpu-eu" in config["excluded_placements"] and "cloud-us" not in config["excluded_placements"]
            keys.append(request.run_key)
            assert _tick(release_change, instance, tick.cursor, home).run_requests == []
            cursor = tick.cursor
        assert len(set(keys)) == 2


def test_environment_sensor_hands_off_the_runs_under_a_changed_placement_each_time(home, store, blobs):
    here = ResearchRun.launch(store, blobs, placement=PLACEMENTS["local-gpu-eu"])
    ResearchRun.launch(store, blobs, placement=PLACEMENTS["cloud-eu"])  # elsewhere: untouched
    before = PLACEMENTS["local-gpu-eu"].environment.runtime_image
    with instance_for_test() as instance:
        cursor = _tick(environment_change, instance, None, home).cursor
        update_placement(store, "cloud-us", runtime_image="baton-worker:9.9", reason="test")  # no run there
        cursor = _tick(environment_change, instance, cursor, home).cursor
        keys = []
        for image in ("baton-worker:2.0", before):  # A -> B -> A
            change = update_placement(store, "local-gpu-eu", runtime_image=image, reason="test")
            tick = _tick(environment_change, instance, cursor, home)
            (request,) = tick.run_requests
            config = _handoff(request)
            assert (config["run"], config["reason"]) == (here.run_id, ENVIRONMENT_CHANGED)
            assert config["excluded_placements"] == ["local-gpu-eu"]
            assert request.run_key.startswith(f"{ENVIRONMENT_CHANGED}:{change.seq}:{here.run_id}:")
            keys.append(request.run_key)
            assert _tick(environment_change, instance, tick.cursor, home).run_requests == []
            cursor = tick.cursor
        assert len(set(keys)) == 2
