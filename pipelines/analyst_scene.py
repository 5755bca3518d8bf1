"""A small, reproducible world for the analyst's view of the Dagster UI (screenshots and the browser test).

`build_scene` fills a fresh Baton home and a fresh DAGSTER_HOME with three
research runs, each through Baton's own calls and the platform's own sensor
and job:

- `run-lineage`: drafted and verified by its worker, discovered, then
  re-verified by `reverification_job` (its evidence and checkpoint
  materialized by Dagster, every check passing);
- `run-stale`: verified, discovered, then a new candidate: its
  `verifier_evidence` partition turns STALE;
- `run-broken`: verified, then evidence naming another candidate hash is
  sealed; the asset checks run, and `evidence_bound_to_candidate` fails.

`start_webserver` runs a real `dagster-webserver` over it on loopback.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, build_sensor_context

from baton.bench.dagster_seed import WorkerRun, seed_placements
from baton.platform_gql import answers, graphql
from baton.platform_procs import ProcessSet, ServiceSpec
from baton.platform_up import free_port
from baton.store.factory import open_blobs, open_store
from pipelines.definitions import defs
from pipelines.resources import BatonResource
from sensors.baton_sensors import run_discovery

REPO = Path(__file__).resolve().parents[1]
LINEAGE_RUN, STALE_RUN, BROKEN_RUN = "run-lineage", "run-stale", "run-broken"
CHECK_STEPS = ["verifier_evidence_evidence_bound_to_candidate", "checkpoints_checkpoint_hashes_verify",
               "checkpoints_budget_never_decreases"]
STALE_QUERY = """
query Stale($pk: String!) {
  assetNodes(assetKeys: [{path: ["verifier_evidence"]}]) { staleStatus(partition: $pk) }
}
"""


class SceneError(RuntimeError):
    """The scene did not come out as it claims (a run not STALE, a check not failed)."""


@dataclass(frozen=True)
class Scene:
    baton_home: Path
    dagster_home: Path

    def env(self) -> dict[str, str]:
        return {"DAGSTER_HOME": str(self.dagster_home), "BATON_HOME": str(self.baton_home)}


def _discover(instance: DagsterInstance, resource: BatonResource, cursor: str | None) -> str | None:
    """One discovery tick, its asset events written as the daemon writes them."""
    result = run_discovery(build_sensor_context(instance=instance, cursor=cursor, resources={"baton": resource}))
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return result.cursor


def build_scene(root: Path) -> Scene:
    """The three runs under `root` (baton-home/, dagster-home/ with the project's dagster.yaml).

    Sets DAGSTER_HOME and BATON_HOME in this process's environment to the scene's.
    """
    scene = Scene(root / "baton-home", root / "dagster-home")
    scene.baton_home.mkdir(parents=True)
    scene.dagster_home.mkdir(parents=True)
    shutil.copy(REPO / "dagster.yaml", scene.dagster_home / "dagster.yaml")
    resource = BatonResource(home=str(scene.baton_home))
    store = open_store(None, scene.baton_home)
    try:
        blobs = open_blobs(scene.baton_home, store)
        placement = seed_placements()[0]
        runs = {run_id: WorkerRun(store, blobs, run_id, placement, 24 * 3600.0)
                for run_id in (LINEAGE_RUN, STALE_RUN, BROKEN_RUN)}
        for run in runs.values():
            run.draft(1)
            run.verify()
        os.environ.update(scene.env())  # dagster.yaml reads DAGSTER_HOME; the resources read BATON_HOME
        with DagsterInstance.get() as instance:
            cursor = _discover(instance, resource, None)
            job = defs.resolve_job_def("reverification_job")
            if not job.execute_in_process(instance=instance, partition_key=LINEAGE_RUN,
                                          resources={"baton": resource}).success:
                raise SceneError(f"reverification_job failed for {LINEAGE_RUN}")
            runs[STALE_RUN].draft(2)
            runs[BROKEN_RUN].forge_evidence(blobs.put(b"a report nobody verified"))
            _discover(instance, resource, cursor)
            checks = job.execute_in_process(instance=instance, partition_key=BROKEN_RUN, op_selection=CHECK_STEPS,
                                            resources={"baton": resource})
            verdicts = {e.check_name: e.passed for e in checks.get_asset_check_evaluations()}
            if verdicts.get("evidence_bound_to_candidate") is not False:
                raise SceneError(f"the broken run's evidence check did not fail: {verdicts}")
    finally:
        store.close()
    return scene


def start_webserver(scene: Scene, logs: Path) -> tuple[ProcessSet, str]:
    """A dagster-webserver over the scene on a free loopback port, answering GraphQL; stop it with `stop_all`."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tool = Path(sys.executable).with_name("dagster-webserver")
    procs = ProcessSet(logs)
    procs.start(ServiceSpec("dagster-webserver", [str(tool), "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1",
                                                  "-p", str(port)], env=scene.env(), cwd=REPO,
                            probe=lambda: answers(url)))
    try:
        procs.wait_ready(timeout_s=300.0)
        status = graphql(url, STALE_QUERY, {"pk": STALE_RUN})["assetNodes"][0]["staleStatus"]
        if status != "STALE":
            raise SceneError(f"{STALE_RUN}'s verifier_evidence is {status}, not STALE")
    except BaseException:
        procs.stop_all()
        raise
    return procs, url
