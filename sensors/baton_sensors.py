"""The platform's sensors: thin wrappers over `baton.platform.sensor_decisions` (all running by default).

Each keeps the seq of the last Baton event it read as its cursor. `run_discovery`
adds a `runs` partition per new run, removes the partitions of finished runs
past BATON_KEEP_FINISHED_RUNS (default 1000; their history stays in Baton's
store), and reports the newest version of each asset per run (at most one event
per asset per run per tick), upstream first, in a few batched writes
(`assets.writes`), the worker-made materializations with their provenance. The
others raise `handoff_job` / `reverification_job` with run keys built from the
change's identity and event seq.
"""

from collections.abc import Callable, Mapping, Sequence

from dagster import (
    AssetKey,
    DagsterInstance,
    DefaultSensorStatus,
    RunConfig,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)
from dagster._core.events import DagsterEventType

from assets.events import DATA_VERSION_TAG, EXTERNAL_ASSETS, asset_event_for
from assets.partitions import RUNS_PARTITIONS_NAME
from assets.writes import write_asset_events
from baton.lineage import ASSETS, AssetVersion
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


def input_pointers(instance: DagsterInstance, asset: str, wanted: Mapping[str, str]) -> dict[str, int]:
    """Storage ids of the newest events of `asset` for the partitions in `wanted` (run id -> data version),
    kept where that event carries the wanted data version: two queries per asset, not two per run."""
    if not wanted:
        return {}
    key = AssetKey(asset)
    kind = DagsterEventType.ASSET_OBSERVATION if asset in EXTERNAL_ASSETS else DagsterEventType.ASSET_MATERIALIZATION
    latest = instance.get_latest_storage_id_by_partition(key, kind, set(wanted))
    if not latest:
        return {}
    # Tags of the same events: anything stored after the first query has a larger id and is left out.
    tags = instance.event_log_storage.get_latest_tags_by_partition(
        key, kind, [DATA_VERSION_TAG], asset_partitions=sorted(latest), before_cursor=max(latest.values()) + 1)
    return {run_id: storage_id for run_id, storage_id in latest.items()
            if tags.get(run_id, {}).get(DATA_VERSION_TAG) == wanted[run_id]}


def report_versions(instance: DagsterInstance, versions: Sequence[AssetVersion]) -> int:
    """Write the asset events for `versions`, upstream asset first, in batches; returns the batches written.

    A worker-made materialization points at its inputs' events (`input_pointers`),
    so each asset's events are stored before the next asset's pointers are read:
    a run's checkpoint found in the same tick as its evidence points at it.
    """
    by_asset: dict[str, list[AssetVersion]] = {name: [] for name in ASSETS}
    for version in versions:
        by_asset[version.asset].append(version)
    external = [asset_event_for(v) for name in ASSETS if name in EXTERNAL_ASSETS for v in by_asset[name]]
    batches = write_asset_events(instance, external)
    for name in (n for n in ASSETS if n not in EXTERNAL_ASSETS):
        made = by_asset[name]
        wanted: dict[str, dict[str, str]] = {}
        for version in made:
            for dep, data_version in version.input_versions.items():
                wanted.setdefault(dep, {})[version.run_id] = data_version
        pointers = {dep: input_pointers(instance, dep, runs) for dep, runs in wanted.items()}
        events = [asset_event_for(v, {dep: pointers[dep][v.run_id] for dep in v.input_versions
                                      if v.run_id in pointers[dep]}) for v in made]
        batches += write_asset_events(instance, events)
    return batches


@sensor(minimum_interval_seconds=INTERVAL_S, default_status=DefaultSensorStatus.RUNNING,
        description="New Baton runs become `runs` partitions; their newest asset versions become asset events.")
def run_discovery(context: SensorEvaluationContext, baton: BatonResource) -> SensorResult:
    """Partitions first (an event for a partition not yet added is dropped silently), then every asset event,
    written here in batches (`assets.writes`): the daemon would write returned `asset_events` one by one.

    The cursor is kept only after the tick: a tick that fails after writing some
    events reads the same window again and reports the same data versions, which is harmless.
    """
    instance = context.instance
    existing = instance.get_dynamic_partitions(RUNS_PARTITIONS_NAME)
    with baton.open() as (store, blobs):
        found = decide.discover_runs(store, blobs, decide.parse_cursor(context.cursor), existing,
                                     keep_finished=_keep_finished())
    if found.add_partitions:
        instance.add_dynamic_partitions(RUNS_PARTITIONS_NAME, list(found.add_partitions))
    for run_id in found.remove_partitions:
        instance.delete_dynamic_partition(RUNS_PARTITIONS_NAME, run_id)
    report_versions(instance, found.versions)
    return SensorResult(cursor=str(found.cursor))


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
