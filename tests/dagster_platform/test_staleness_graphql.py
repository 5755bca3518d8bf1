"""The staleness a user sees: a running dagster-webserver answers over GraphQL.

A run's worker-made evidence is reported as the daemon would; a new candidate
version turns that run's `verifier_evidence` partition STALE (cause: candidates
has a new data version) and `reverification_job` makes it FRESH again. The
webserver runs in its own session on a temporary DAGSTER_HOME and is stopped by
its process group.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, build_sensor_context

from baton.platform_gql import answers, graphql
from baton.platform_procs import ProcessSet, ServiceSpec
from baton.platform_up import free_port
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from pipelines.definitions import defs
from pipelines.resources import BatonResource
from sensors.baton_sensors import run_discovery

from .platform_support import ResearchRun

REPO = Path(__file__).resolve().parents[2]
STALE = """
query Stale($pk: String!) {
  assetNodes(assetKeys: [{path: ["verifier_evidence"]}]) {
    assetKey { path } staleStatus(partition: $pk)
    staleCauses(partition: $pk) { key { path } partitionKey category reason }
  }
}
"""


@pytest.fixture
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "dagster-home"
    root.mkdir()
    shutil.copy(REPO / "dagster.yaml", root / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(root))
    return root


@pytest.fixture
def webserver(dagster_home: Path, home: Path, tmp_path: Path) -> Iterator[str]:
    """A dagster-webserver on workspace.yaml, answering GraphQL at the returned URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tool = Path(sys.executable).with_name("dagster-webserver")
    procs = ProcessSet(tmp_path / "logs")
    procs.start(ServiceSpec("dagster-webserver", [str(tool), "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1",
                                                  "-p", str(port)],
                            env={"DAGSTER_HOME": str(dagster_home), "BATON_HOME": str(home)}, cwd=REPO,
                            probe=lambda: answers(url)))
    try:
        procs.wait_ready(timeout_s=180.0)
        yield url
    finally:
        procs.stop_all()
        assert not any(m.group_alive() for m in procs.services)


def stale_status(url: str, run_id: str) -> tuple[str, list[dict[str, Any]]]:
    (node,) = graphql(url, STALE, {"pk": run_id})["assetNodes"]
    return node["staleStatus"], node["staleCauses"]


def discover(instance: DagsterInstance, cursor: str | None, home: Path) -> str | None:
    """One discovery tick, its asset events written as the daemon writes them; the new cursor."""
    result = run_discovery(build_sensor_context(instance=instance, cursor=cursor,
                                                resources={"baton": BatonResource(home=str(home))}))
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return result.cursor


def test_new_candidate_turns_evidence_stale_and_reverification_makes_it_fresh(
        webserver: str, home: Path, store: SqlStore, blobs: BlobStore) -> None:
    changed, other = ResearchRun.launch(store, blobs), ResearchRun.launch(store, blobs)
    for run in (changed, other):
        run.draft()
        run.verify()
    with DagsterInstance.get() as instance:  # the webserver's instance (same DAGSTER_HOME)
        cursor = discover(instance, None, home)
        assert stale_status(webserver, changed.run_id) == ("FRESH", [])

        new = changed.draft()
        discover(instance, cursor, home)
        status, causes = stale_status(webserver, changed.run_id)
        assert status == "STALE"
        assert causes == [{"key": {"path": ["candidates"]}, "partitionKey": changed.run_id, "category": "DATA",
                           "reason": "has a new data version"}], causes
        assert stale_status(webserver, other.run_id) == ("FRESH", [])

        result = defs.resolve_job_def("reverification_job").execute_in_process(
            instance=instance, partition_key=changed.run_id, resources={"baton": BatonResource(home=str(home))})
        assert result.success
    assert stale_status(webserver, changed.run_id) == ("FRESH", [])
    evidence = store.list_events(run_id=changed.run_id, event_types=["evidence_recorded"])
    assert evidence and evidence[-1][1].detail["candidate_hash"] == new.artifact_hash
