"""reverification_job in process over a real store (SQLite and PostgreSQL): what it materializes and records."""

from __future__ import annotations

from pathlib import Path

from dagster import AssetKey, instance_for_test

from baton.models import EventType
from baton.store.base import SqlStore
from baton.store.factory import open_blobs
from pipelines.definitions import defs
from pipelines.resources import BatonResource

from .platform_support import ResearchRun


def test_job_materializes_versions_with_their_metadata(home: Path, any_store: SqlStore) -> None:
    blobs = open_blobs(home, any_store)
    run = ResearchRun.launch(any_store, blobs)  # type: ignore[arg-type]
    run.draft()
    first_evidence = run.verify()
    second = run.draft()
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("runs", [run.run_id])
        result = defs.resolve_job_def("reverification_job").execute_in_process(
            instance=instance, partition_key=run.run_id, resources={"baton": BatonResource()})
        assert result.success
        by_asset = {m.asset_key.path[0]: m for m in result.asset_materializations_for_node("verifier_evidence")}
        by_asset |= {m.asset_key.path[0]: m for m in result.asset_materializations_for_node("checkpoints")}
        record = instance.get_latest_materialization_event(AssetKey("verifier_evidence"))
        assert record is not None and record.dagster_event.partition == run.run_id
    ((_, recorded),) = any_store.list_events(run_id=run.run_id, event_types=[EventType.EVIDENCE_RECORDED])
    evidence = by_asset["verifier_evidence"]
    assert evidence.tags["dagster/data_version"] == recorded.detail["evidence_ref"]
    meta = {k: v.value for k, v in evidence.metadata.items()}
    assert meta["candidate_hash"] == second.artifact_hash and meta["result"] == "PASS"
    assert meta["run"] == run.run_id and meta["release_id"] == run.head.release_id
    assert meta["environment_id"] == run.head.environment_id and meta["epoch"] == run.epoch
    assert meta["boundary"] == run.head.boundary.value and meta["resumability"] == run.head.resumability.value
    assert meta["parent_version"] != recorded.detail["evidence_ref"] and meta["parent_version"]
    assert meta["open_run"] == f"baton inspect {run.run_id}"
    assert first_evidence.candidate_hash != second.artifact_hash
    checkpoint = by_asset["checkpoints"]
    assert checkpoint.tags["dagster/data_version"] == run.head.checkpoint_hash
