"""The platform's sensors: thin wrappers over `baton.platform.sensor_decisions` (all running by default).

Each keeps the seq of the last Baton event it read as its cursor. `run_discovery`
adds a `runs` partition per new run, removes the partitions of finished runs
past BATON_KEEP_FINISHED_RUNS (default 1000; their history stays in Baton's
store), and reports the newest version of each asset per run (at most one event
per asset per run per tick): the external assets' observations at once, the
worker-made materializations with their provenance in the tick's result. The others raise `handoff_job` / `reverification_job`
with run keys built from the change's identity and event seq.
"""

from collections.abc import Callable

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    DefaultSensorStatus,
    RunConfig,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from assets.events import DATA_VERSION_TAG, EXTERNAL_ASSETS, asset_event_for
from assets.partitions import RUNS_PARTITIONS_NAME
from baton.lineage import ASSETS
from baton.platform import sensor_decisions as decide
from baton.platform.archive import KEEP_FINISHED_ENV, keep_finished_from
from baton.platform.sensor_decisions import Decisions, JobRequest
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from pipelines.jobs import HandoffConfig, handoff_job, reverification_job
from pipelines.resources import BatonResource

INTERVAL_S = 5  # the daemon's floor: shorter intervals still tick about every 5 s


def _keep_finished() -> int:
    import os

    return keep_finished_from(os.environ.get(KEEP_FINISHED_ENV))


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


def input_pointer(instance: DagsterInstance, asset: str, run_id: str, data_version: str) -> int | None:
    """Storage id of the newest event of `asset` for partition `run_id`, if it carries `data_version`."""
    records_filter = AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[run_id])
    fetch = instance.fetch_observations if asset in EXTERNAL_ASSETS else instance.fetch_materializations
    records = fetch(records_filter, limit=1).records
    if not records:
        return None
    entry = records[0].event_log_entry
    event = entry.asset_observation if asset in EXTERNAL_ASSETS else entry.asset_materialization
    tags = (event.tags if event is not None else None) or {}
    return records[0].storage_id if tags.get(DATA_VERSION_TAG) == data_version else None


@sensor(minimum_interval_seconds=INTERVAL_S, default_status=DefaultSensorStatus.RUNNING,
        description="New Baton runs become `runs` partitions; their newest asset versions become asset events.")
def run_discovery(context: SensorEvaluationContext, baton: BatonResource) -> SensorResult:
    """Partitions first, then the workers' observations (written now, so later events can point at them),
    then the worker-made materializations with their provenance (returned, written after the tick)."""
    instance = context.instance
    existing = instance.get_dynamic_partitions(RUNS_PARTITIONS_NAME)
    with baton.open() as (store, blobs):
        found = decide.discover_runs(store, blobs, decide.parse_cursor(context.cursor), existing,
                                     keep_finished=_keep_finished())
    if found.add_partitions:
        instance.add_dynamic_partitions(RUNS_PARTITIONS_NAME, list(found.add_partitions))
    for run_id in found.remove_partitions:
        instance.delete_dynamic_partition(RUNS_PARTITIONS_NAME, run_id)
    for version in found.versions:
        if version.asset in EXTERNAL_ASSETS:
            instance.report_runless_asset_event(asset_event_for(version))
    materializations = []
    for version in sorted((v for v in found.versions if v.asset not in EXTERNAL_ASSETS),
                          key=lambda v: ASSETS.index(v.asset)):
        pointers = {dep: input_pointer(instance, dep, version.run_id, dv) for dep, dv in version.input_versions.items()}
        materializations.append(asset_event_for(version, {k: p for k, p in pointers.items() if p is not None}))
    return SensorResult(asset_events=materializations, cursor=str(found.cursor))


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
RUN_KEY_TAG = "dagster/run_key"
LAUNCHED_LOOKBACK = 500


def launched_run_keys(instance: DagsterInstance, reason: str) -> set[str]:
    """Run keys of the recent `handoff_job` runs for `reason` (what the daemon de-duplicates)."""
    runs = instance.get_runs(filters=RunsFilter(job_name=handoff_job.name, tags={"baton/reason": reason}),
                             limit=LAUNCHED_LOOKBACK)
    return {run.tags[RUN_KEY_TAG] for run in runs if RUN_KEY_TAG in run.tags}


@sensor(name="lease_expiry", minimum_interval_seconds=INTERVAL_S, default_status=DefaultSensorStatus.RUNNING,
        description="A lost worker: its run's lease lapsed by the database clock: hand off.", jobs=[handoff_job])
def lease_expiry(context: SensorEvaluationContext, baton: BatonResource) -> SensorResult:
    """A lapsed lease stays lapsed until a handoff lands: leave out the ones already launched for its epoch."""
    launched = launched_run_keys(context.instance, decide.LEASE_EXPIRED)
    with baton.open() as (store, _):
        decided = decide.lease_expiries(store, decide.parse_cursor(context.cursor), already_requested=launched)
    return SensorResult(run_requests=[run_request(r) for r in decided.requests], cursor=str(decided.cursor))

SENSORS = [run_discovery, release_change, environment_change, artifact_change, lease_expiry]
