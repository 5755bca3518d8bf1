"""The platform's sensors: thin wrappers over `baton.platform.sensor_decisions` (all running by default).

Each keeps the seq of the last Baton event it read as its cursor. `run_discovery`
adds a `runs` partition per new run, removes archived finished runs' partitions,
and reports the newest version of each asset per run (at most one event per
asset per run per tick). The others raise `handoff_job` / `reverification_job`
with run keys built from the change's identity and event seq.
"""

from collections.abc import Callable

from dagster import (
    DefaultSensorStatus,
    RunConfig,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from assets.events import asset_event_for
from assets.partitions import RUNS_PARTITIONS_NAME, runs_partitions
from baton.platform import sensor_decisions as decide
from baton.platform.sensor_decisions import Decisions, JobRequest
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from pipelines.jobs import HandoffConfig, handoff_job, reverification_job
from pipelines.resources import BatonResource

INTERVAL_S = 5  # the daemon's floor: shorter intervals still tick about every 5 s
KEEP_FINISHED_ENV = "BATON_KEEP_FINISHED_RUNS"


def _keep_finished() -> int:
    import os

    value = os.environ.get(KEEP_FINISHED_ENV, "").strip()
    return int(value) if value else decide.DEFAULT_KEEP_FINISHED


def run_request(request: JobRequest) -> RunRequest:
    """A Dagster run request for one decided job."""
    tags = {"baton/run": request.run_id, "baton/reason": request.reason}
    if request.job_name == decide.REVERIFICATION_JOB:
        return RunRequest(run_key=request.run_key, partition_key=request.run_id, tags=tags,
                          job_name=reverification_job.name)
    config = HandoffConfig(run=request.run_id, reason=request.reason, target=request.target or "",
                           source_alive=request.source_alive, allow_same_placement=request.allow_same_placement,
                           excluded_placements=list(request.excluded_placements))
    return RunRequest(run_key=request.run_key, run_config=RunConfig(ops={"hand_off": config}), tags=tags,
                      job_name=handoff_job.name)


@sensor(minimum_interval_seconds=INTERVAL_S, default_status=DefaultSensorStatus.RUNNING,
        description="New Baton runs become `runs` partitions; their newest asset versions become asset events.")
def run_discovery(context: SensorEvaluationContext, baton: BatonResource) -> SensorResult:
    existing = context.instance.get_dynamic_partitions(RUNS_PARTITIONS_NAME)
    with baton.open() as (store, blobs):
        found = decide.discover_runs(store, blobs, decide.parse_cursor(context.cursor), existing,
                                     keep_finished=_keep_finished())
    requests = []
    if found.add_partitions:
        requests.append(runs_partitions.build_add_request(list(found.add_partitions)))
    if found.remove_partitions:
        requests.append(runs_partitions.build_delete_request(list(found.remove_partitions)))
    return SensorResult(dynamic_partitions_requests=requests,
                        asset_events=[asset_event_for(v) for v in found.versions], cursor=str(found.cursor))


def _job_sensor(name: str, description: str, decide_fn: Callable[[SqlStore, Blobs, int], Decisions]):  # type: ignore[no-untyped-def]
    @sensor(name=name, minimum_interval_seconds=INTERVAL_S, default_status=DefaultSensorStatus.RUNNING,
            description=description, jobs=[handoff_job, reverification_job])
    def _sensor(context: SensorEvaluationContext, baton: BatonResource) -> SensorResult:
        with baton.open() as (store, blobs):
            decided = decide_fn(store, blobs, decide.parse_cursor(context.cursor))
        return SensorResult(run_requests=[run_request(r) for r in decided.requests], cursor=str(decided.cursor))

    return _sensor


release_change = _job_sensor("release_change", "A run's release withdrawn, or a newer allowed one published: hand off.",
                             lambda store, blobs, cursor: decide.release_changes(store, cursor))
environment_change = _job_sensor("environment_change", "A placement's environment identity changed under its runs.",
                                 lambda store, blobs, cursor: decide.environment_changes(store, cursor))
artifact_change = _job_sensor("artifact_change", "Evidence no longer bound to the current candidate: re-verify.",
                              decide.artifact_changes)
lease_expiry = _job_sensor("lease_expiry", "A lost worker: its run's lease lapsed by the database clock: hand off.",
                           lambda store, blobs, cursor: decide.lease_expiries(store, cursor))

SENSORS = [run_discovery, release_change, environment_change, artifact_change, lease_expiry]
