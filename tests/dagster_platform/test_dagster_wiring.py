"""The Dagster wiring over a real Baton store: validation, sensors with build_sensor_context, jobs in process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, build_sensor_context, instance_for_test
from dagster._core.definitions.data_version import CachingStaleStatusResolver
from dagster._core.loader import LoadingContextForTest

from assets.events import INPUT_EVENT_POINTER_PREFIX
from baton.models import EventType
from baton.platform.sensor_decisions import ARTIFACT_CHANGED, LEASE_EXPIRED
from pipelines.definitions import defs
from pipelines.jobs import handoff_job
from pipelines.resources import BatonResource
from sensors.baton_sensors import artifact_change, lease_expiry, run_discovery

from .platform_support import ResearchRun, newest_seq

REPO = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate(tmp_path: Path) -> None:
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "All code locations passed validation" in done.stderr + done.stdout


def _tick(sensor, instance: DagsterInstance, cursor: str | None, home: Path):  # type: ignore[no-untyped-def]
    context = build_sensor_context(instance=instance, cursor=cursor, resources={"baton": BatonResource(home=str(home))})
    return sensor(context)


def _partition_events(instance: DagsterInstance, key: str) -> list:  # type: ignore[type-arg]
    fetch = instance.fetch_observations if key in ("observations", "candidates") else instance.fetch_materializations
    return list(fetch(AssetKey(key), limit=5).records)


def test_run_discovery_adds_partitions_and_one_event_per_asset_then_nothing(home, store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    with instance_for_test() as instance:
        first = _tick(run_discovery, instance, None, home)
        assert instance.get_dynamic_partitions("runs") == [run.run_id]
        assert first.asset_events == []  # written in the tick, in batches, not left to the daemon's one-by-one path
        records = {key: _partition_events(instance, key)
                   for key in ("observations", "candidates", "verifier_evidence", "checkpoints")}
        assert {key: [r.partition_key for r in found] for key, found in records.items()} == {
            key: [run.run_id] for key in records}
        # Provenance points at the inputs' events of the same tick, the checkpoint's at the evidence too.
        (candidate,), (evidence,), (checkpoint,) = (records[k] for k in ("candidates", "verifier_evidence", "checkpoints"))
        assert evidence.asset_materialization.tags[INPUT_EVENT_POINTER_PREFIX + "candidates"] == str(candidate.storage_id)
        assert checkpoint.asset_materialization.tags[INPUT_EVENT_POINTER_PREFIX + "verifier_evidence"] == str(
            evidence.storage_id)
        second = _tick(run_discovery, instance, first.cursor, home)
        assert second.asset_events == []
        assert {key: len(_partition_events(instance, key)) for key in records} == {key: 1 for key in records}


def _evidence_status(instance: DagsterInstance, run_id: str) -> tuple[str, list[str]]:
    resolver = CachingStaleStatusResolver(instance, defs.resolve_asset_graph(), LoadingContextForTest(instance))
    key = AssetKey("verifier_evidence")
    return resolver.get_status(key, run_id).value, [c.reason for c in resolver.get_stale_causes(key, run_id)]


def test_worker_evidence_turns_stale_on_a_new_candidate_only_in_its_partition(home, store, blobs):
    changed, other = ResearchRun.launch(store, blobs), ResearchRun.launch(store, blobs)
    for run in (changed, other):
        run.draft()
        run.verify()
    with instance_for_test() as instance:
        first = _tick(run_discovery, instance, None, home)
        for event in first.asset_events:  # what the daemon writes after the tick
            instance.report_runless_asset_event(event)
        assert _evidence_status(instance, changed.run_id)[0] == "FRESH"
        changed.draft()
        second = _tick(run_discovery, instance, first.cursor, home)
        for event in second.asset_events:
            instance.report_runless_asset_event(event)
        status, causes = _evidence_status(instance, changed.run_id)
        assert status == "STALE" and causes
        assert _evidence_status(instance, other.run_id)[0] == "FRESH"


def test_artifact_change_sensor_requests_one_reverification(home, store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    cursor = str(newest_seq(store))
    run.draft()
    with instance_for_test() as instance:
        first = _tick(artifact_change, instance, cursor, home)
        (request,) = first.run_requests
        assert request.partition_key == run.run_id and request.job_name == "reverification_job"
        assert request.run_key.startswith(ARTIFACT_CHANGED)
        assert _tick(artifact_change, instance, first.cursor, home).run_requests == []


def test_lease_expiry_sensor_requests_one_handoff(home, store, blobs):
    lost = ResearchRun.launch(store, blobs, lease_ttl_s=0.2)
    deadline = store.get_lease(lost.run_id).expires_at
    while store.db_now() <= deadline:
        pass
    with instance_for_test() as instance:
        first = _tick(lease_expiry, instance, None, home)
        (request,) = first.run_requests
        assert request.job_name == "handoff_job" and request.run_key == f"{LEASE_EXPIRED}:{lost.run_id}:{lost.epoch}"
        assert request.run_config["ops"]["hand_off"]["config"]["source_alive"] is False


def test_reverification_job_records_evidence_and_materializes(home, any_store, blobs):
    run = ResearchRun.launch(any_store, blobs)
    run.draft()
    run.verify()
    run.draft()
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("runs", [run.run_id])
        job = defs.resolve_job_def("reverification_job")
        result = job.execute_in_process(instance=instance, partition_key=run.run_id,
                                        resources={"baton": BatonResource(home=str(home))})
        assert result.success
        mats = result.get_asset_materialization_events()
        assert sorted(m.asset_key.path[0] for m in mats) == ["checkpoints", "verifier_evidence"]
    (_, event), = any_store.list_events(run_id=run.run_id, event_types=[EventType.EVIDENCE_RECORDED])
    assert event.detail["candidate_hash"] == run.parts.current_candidate.artifact_hash
    assert event.detail["result"] == "PASS"


def test_aborted_handoff_fails_the_job_with_the_reason(home, store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.finish()  # a finished run cannot move: the coordinator aborts
    from builders.live import live_targets

    with live_targets(home), instance_for_test() as instance:
        result = handoff_job.execute_in_process(
            instance=instance, raise_on_error=False, resources={"baton": BatonResource(home=str(home))},
            run_config={"ops": {"hand_off": {"config": {"run": run.run_id, "reason": "test"}}}},
        )
    assert not result.success
    failure = result.failure_data_for_node("hand_off")
    assert failure is not None and "aborted" in str(failure.error.message)
    assert "not active" in str(failure.user_failure_data.description)
    aborted = [e for _, e in store.list_events(run_id=run.run_id, event_types=[EventType.HANDOFF_ABORTED])]
    assert len(aborted) == 1


def test_handoff_job_moves_a_lost_run_through_the_fleet_dispatch(home, any_store, blobs):
    lost = ResearchRun.launch(any_store, blobs, lease_ttl_s=0.2)
    lost.draft()
    deadline = any_store.get_lease(lost.run_id).expires_at
    while any_store.db_now() <= deadline:
        pass
    from builders.live import live_targets

    config = {"run": lost.run_id, "reason": LEASE_EXPIRED, "source_alive": False, "allow_same_placement": True}
    with live_targets(home), instance_for_test() as instance:
        result = handoff_job.execute_in_process(instance=instance, resources={"baton": BatonResource(home=str(home))},
                                                run_config={"ops": {"hand_off": {"config": config}}})
    assert result.success
    (_, moved), = any_store.list_events(run_id=lost.run_id, event_types=[EventType.OWNERSHIP_TRANSFERRED])
    assert moved.reason == LEASE_EXPIRED and moved.target_epoch == lost.epoch + 1
    assert any_store.get_lease(lost.run_id).epoch == lost.epoch + 1
    passed = any_store.list_events(run_id=lost.run_id, event_types=[EventType.COMPATIBILITY_PASSED])
    assert len(passed) == 1


def test_reverification_job_makes_stale_evidence_fresh(home, store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    with instance_for_test() as instance:
        first = _tick(run_discovery, instance, None, home)
        for event in first.asset_events:
            instance.report_runless_asset_event(event)
        run.draft()
        second = _tick(run_discovery, instance, first.cursor, home)
        for event in second.asset_events:
            instance.report_runless_asset_event(event)
        assert _evidence_status(instance, run.run_id)[0] == "STALE"
        result = defs.resolve_job_def("reverification_job").execute_in_process(
            instance=instance, partition_key=run.run_id, resources={"baton": BatonResource(home=str(home))})
        assert result.success
        assert _evidence_status(instance, run.run_id) == ("FRESH", [])


def _check_results(home: Path, run_id: str) -> dict[str, bool]:
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("runs", [run_id])
        result = defs.resolve_job_def("reverification_job").execute_in_process(
            instance=instance, partition_key=run_id, resources={"baton": BatonResource(home=str(home))},
            raise_on_error=False)
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        if not result.success:
            (failure,) = [e for e in result.all_events if e.is_step_failure]
            checks["step_failure"] = failure.step_failure_data.error.to_string()  # type: ignore[assignment]
        return checks


def test_asset_checks_pass_on_a_sound_run_and_reverification_refuses_a_corrupted_blob(home, store, blobs):
    run = ResearchRun.launch(store, blobs)
    run.draft()
    run.verify()
    assert _check_results(home, run.run_id) == {
        "evidence_bound_to_candidate": True, "checkpoint_hashes_verify": True, "budget_never_decreases": True}
    path = blobs._path(run.observations[1].content_ref)
    path.chmod(0o644)
    path.write_bytes(b"tampered")
    # Re-verification refuses state that no longer verifies: the job fails naming the corrupt blob.
    broken = _check_results(home, run.run_id)
    assert "corrupt" in broken["step_failure"] and run.observations[1].content_ref in broken["step_failure"]


def test_budget_check_fails_when_usage_goes_down(home, store, blobs):
    import dataclasses
    from decimal import Decimal

    from baton.models import Boundary, BudgetUsage

    run = ResearchRun.launch(store, blobs)
    run.draft()
    lower = run.parts.budget.model_copy(update={"used": BudgetUsage(model_spend_usd=Decimal("0"))})
    run.seal(Boundary.CANDIDATE_READY, parts=dataclasses.replace(run.parts, budget=lower))
    assert _check_results(home, run.run_id)["budget_never_decreases"] is False


def test_environment_change_sensor_moves_runs_off_the_changed_placement_once(home, store, blobs):
    from baton.catalog.changes import update_placement
    from baton.platform.sensor_decisions import ENVIRONMENT_CHANGED
    from sensors.baton_sensors import environment_change

    on_it = ResearchRun.launch(store, blobs)  # local-gpu-eu
    with instance_for_test() as instance:
        idle = _tick(environment_change, instance, None, home)
        assert idle.run_requests == []
        keys = []
        cursor = idle.cursor
        for image in ("worker:2", "worker:1-rebuilt"):  # two changes: two jobs, distinct keys
            update_placement(store, "local-gpu-eu", runtime_image=image, reason="test")
            tick = _tick(environment_change, instance, cursor, home)
            (request,) = tick.run_requests
            assert request.run_key.startswith(ENVIRONMENT_CHANGED) and request.tags["baton/run"] == on_it.run_id
            assert request.run_config["ops"]["hand_off"]["config"]["excluded_placements"] == ["local-gpu-eu"]
            keys.append(request.run_key)
            cursor = tick.cursor
        assert len(set(keys)) == 2
        assert _tick(environment_change, instance, cursor, home).run_requests == []


def test_release_change_sensor_hands_off_runs_of_a_withdrawn_release(home, store, blobs):
    from baton.catalog.changes import withdraw_release
    from baton.platform.sensor_decisions import RELEASE_WITHDRAWN
    from sensors.baton_sensors import release_change

    run = ResearchRun.launch(store, blobs)
    with instance_for_test() as instance:
        idle = _tick(release_change, instance, None, home)
        assert idle.run_requests == []
        withdraw_release(store, run.parts.release.release_id, reason="test")
        tick = _tick(release_change, instance, idle.cursor, home)
        (request,) = tick.run_requests
        assert request.run_key.startswith(RELEASE_WITHDRAWN) and request.tags["baton/run"] == run.run_id
        assert _tick(release_change, instance, tick.cursor, home).run_requests == []
