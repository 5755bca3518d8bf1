"""The Dagster half of `baton bench dagster`: sensor ticks, GraphQL latency and the archive step, measured.

`baton` imports no Dagster, so `baton bench dagster` seeds a Baton store with
plain Baton calls and then runs this module as a subprocess over that store:

    python -m pipelines.bench_dagster --baton-home H --dagster-home D --out result.json

It measures, on a persistent Dagster instance under D (the `dagster.yaml` the
parent wrote there: SQLite, or the documented dagster-postgres block, whose
URL comes from DAGSTER_PG_URL):

1. catch-up: `run_discovery` ticked from cursor 0 until it has read every
   event (every run becomes a partition, its newest versions asset events;
   the sensor writes every asset event itself, in batches per asset,
   `assets.writes.write_asset_events`, timed by `WriteMeter`);
2. steady ticks of each of the five sensors and the freshness schedule, each
   keeping its own cursor as the daemon does: idle rounds (nothing changed)
   and change rounds (one new candidate on an active run, one new run, one
   placement's environment changed);
3. GraphQL on a real `dagster-webserver` on loopback: the asset catalog, a
   run's lineage, a run's partition page, the partition statuses of the run
   assets, stale status of one partition, the list of run partitions, the
   Dagster runs list (`--slow-queries`: stale status of every partition too);
4. the real `dagster-daemon run`: each sensor's cursor set over GraphQL to
   where step 2 left it, then the duration of its ticks from Dagster's own
   tick records;
5. the archive step: `run_discovery` with `BATON_KEEP_FINISHED_RUNS` lowered to
   `--keep-finished`, partition counts before and after, and the catalog and
   partition statuses queries again.

`--ticks-only` skips 1 (partitions added in one call, cursors at the newest
event), 3 and 4.

Progress goes to stdout as JSON lines (`{"phase": ..., "done": i, "total": n}`);
the result is one JSON document written to `--out`. Timings are wall-clock
`time.perf_counter` around the real sensor/schedule functions and the HTTP
round trip.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetObservation,
    AssetRecordsFilter,
    DagsterInstance,
    SensorDefinition,
    SensorResult,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
)

from assets.events import EXTERNAL_ASSETS
from assets.partitions import RUNS_PARTITIONS_NAME
from baton.bench.dagster_seed import SeedPlan, add_draft, seed_run
from baton.bench.measure import percentile
from baton.catalog.changes import current_placements, update_placement
from baton.platform_gql import GraphQLError, answers, graphql
from baton.platform_procs import ProcessSet, ServiceSpec
from baton.platform_up import free_port
from baton.store.factory import open_blobs, open_store
from pipelines.definitions import defs
from pipelines.resources import BatonResource
from pipelines.schedules import freshness_reverification
from sensors import baton_sensors
from sensors.baton_sensors import KEEP_FINISHED_ENV, SENSORS, run_discovery

REPO = Path(__file__).resolve().parents[1]
RUN_ASSETS = '[{path: ["observations"]}, {path: ["candidates"]}, {path: ["verifier_evidence"]}, {path: ["checkpoints"]}]'

QUERIES: dict[str, str] = {
    # the asset catalog page: every asset with its group, kinds, partitioning and partition counts
    "asset_catalog": """
query Catalog {
  assetsOrError { __typename ... on AssetConnection { nodes { key { path } definition {
    groupName description kinds jobNames partitionDefinition { description }
    partitionStats { numMaterialized numPartitions numFailed numMaterializing } } } } }
}""",
    # the asset graph, and one run's versions along it (what the lineage view shows for a partition)
    "lineage_of_one_run": """
query Lineage($pk: String!) {
  assetNodes(assetKeys: %s) {
    assetKey { path } dependencyKeys { path } dependedByKeys { path }
    dataVersion(partition: $pk) staleStatus(partition: $pk)
    staleCauses(partition: $pk) { key { path } category reason }
    assetMaterializations(partitions: [$pk], limit: 1) { timestamp metadataEntries { label } }
    assetObservations(partitions: [$pk], limit: 1) { timestamp metadataEntries { label } }
  }
}""" % RUN_ASSETS,
    # one run's partition page: its events, tags and metadata on every asset, and its check results
    "run_partition_page": """
query RunPartition($pk: String!) {
  assetNodes(assetKeys: %s) {
    assetKey { path } staleStatus(partition: $pk)
    latestMaterializationByPartition(partitions: [$pk]) { runId timestamp tags { key value }
      metadataEntries { label } }
    assetMaterializations(partitions: [$pk], limit: 10) { runId timestamp tags { key value } metadataEntries { label } }
    assetObservations(partitions: [$pk], limit: 10) { runId timestamp tags { key value } metadataEntries { label } }
    assetChecksOrError { __typename ... on AssetChecks { checks { name
      executionForLatestMaterialization { status timestamp } } } }
  }
}""" % RUN_ASSETS,
    # the partitions bar and list of the run assets
    "partition_statuses": """
query Statuses {
  assetNodes(assetKeys: %s) {
    assetKey { path }
    partitionStats { numMaterialized numPartitions numFailed numMaterializing }
    assetPartitionStatuses { __typename ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } }
  }
}""" % RUN_ASSETS,
    "run_partitions_page": """
query Partitions {
  assetNodes(assetKeys: [{path: ["checkpoints"]}]) { partitionKeyConnection(limit: 100, ascending: false) { results hasMore } }
}""",
    "stale_status_one_partition": """
query Stale($pk: String!) {
  assetNodes(assetKeys: [{path: ["verifier_evidence"]}]) {
    staleStatus(partition: $pk) staleCauses(partition: $pk) { key { path } partitionKey category reason }
  }
}""",
    "dagster_runs_list": """
query Runs { runsOrError(limit: 50) { __typename ... on Runs { results { runId jobName status tags { key value } } } } }
""",
}

SLOW_QUERIES: dict[str, str] = {
    # stale status of every partition: 79 s p50 at 1,000 runs (docs/benchmarks.md); asked only with --slow-queries
    "stale_status_all_partitions": """
query StaleAll {
  assetNodes(assetKeys: [{path: ["verifier_evidence"]}]) { partitionKeys staleStatusByPartition }
}""",
}


BATCH_WRITE = ("assets.writes.write_asset_events inside the tick: one batch per asset and event type per "
               "tick (one INSERT on dagster-postgres, one transaction per shard on SQLite)")


class WriteMeter:
    """Time and count what `run_discovery` writes, by wrapping the sensor module's `write_asset_events`."""

    def __init__(self) -> None:
        self.seconds, self.materializations, self.observations, self.batches = 0.0, 0, 0, 0
        self._real = baton_sensors.write_asset_events

    def __call__(self, instance: DagsterInstance, events: Sequence[Any]) -> int:
        started = time.perf_counter()
        batches = self._real(instance, events)
        self.seconds += time.perf_counter() - started
        self.batches += batches
        self.materializations += sum(1 for e in events if isinstance(e, AssetMaterialization))
        self.observations += sum(1 for e in events if isinstance(e, AssetObservation))
        return batches

    def __enter__(self) -> WriteMeter:
        baton_sensors.write_asset_events = self  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        baton_sensors.write_asset_events = self._real  # type: ignore[assignment]


def say(phase: str, done: int = 0, total: int = 0, **extra: Any) -> None:
    """One progress line for the parent's progress bar."""
    print(json.dumps({"phase": phase, "done": done, "total": total, **extra}), flush=True)


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def summary(samples_s: list[float]) -> dict[str, Any]:
    """n, median, p95, min, max in milliseconds."""
    values = [s * 1000.0 for s in samples_s]
    return {"n": len(values), "p50_ms": round(statistics.median(values), 2), "p95_ms": round(percentile(values, 95), 2),
            "min_ms": round(min(values), 2), "max_ms": round(max(values), 2)}


class Bench:
    """One Baton home and one Dagster instance, measured."""

    def __init__(self, baton_home: Path, instance: DagsterInstance, plan: SeedPlan) -> None:
        self.home, self.instance, self.plan = baton_home, instance, plan
        self.resource = BatonResource(home=str(baton_home))
        self.cursors: dict[str, str | None] = {s.name: None for s in SENSORS}
        self.writes = WriteMeter()

    def tick(self, sensor: SensorDefinition) -> tuple[float, int, int]:
        """One evaluation of `sensor` from its cursor, its result applied as the daemon applies it.

        Returns (seconds, run requests, materializations written). The
        evaluation writes every asset event itself (`run_discovery` returns
        none for the daemon to write); `self.writes` keeps the writes' share.
        """
        context = build_sensor_context(instance=self.instance, cursor=self.cursors[sensor.name],
                                       resources={"baton": self.resource}, sensor_name=sensor.name)
        before = self.writes.materializations
        started = time.perf_counter()
        with self.writes:
            result = sensor(context)
        elapsed = time.perf_counter() - started
        assert isinstance(result, SensorResult), result
        if result.asset_events:
            raise RuntimeError(f"{sensor.name} returned asset events for the daemon to write one by one")
        self.cursors[sensor.name] = result.cursor
        return elapsed, len(result.run_requests or ()), self.writes.materializations - before

    def schedule_tick(self) -> tuple[float, int]:
        context = build_schedule_context(instance=self.instance, resources={"baton": self.resource},
                                         scheduled_execution_time=dt.datetime.now(dt.UTC))
        started = time.perf_counter()
        result = freshness_reverification(context)
        elapsed = time.perf_counter() - started
        return elapsed, 0 if isinstance(result, SkipReason) else len(result)

    def partitions(self) -> int:
        return len(self.instance.get_dynamic_partitions(RUNS_PARTITIONS_NAME))

    # -------------------------------------------------------------- phases

    def catch_up(self, budget_s: float | None = None) -> dict[str, Any]:
        """run_discovery from cursor 0 until the cursor stops moving (every run kept as a partition).

        With `budget_s`, ticking stops once that much tick time is spent; the
        rest is then fast-forwarded (the remaining runs become partitions in one
        call, the cursor goes to the newest event) and the result says how far
        the catch-up got and at what rate.
        """
        os.environ[KEEP_FINISHED_ENV] = str(self.plan.runs * 2)
        ticks: list[float] = []
        events = 0
        self.writes = WriteMeter()
        with _store(self.home) as (store, _):
            total = _newest_seq(store)
        load_before = os.getloadavg()
        while True:
            before = self.cursors[run_discovery.name]
            elapsed, _, materializations = self.tick(run_discovery)
            ticks.append(elapsed)
            events += materializations
            say("catch-up", int(self.cursors[run_discovery.name] or 0), total)
            if self.cursors[run_discovery.name] == before:
                break
            if budget_s is not None and sum(ticks) >= budget_s:
                break
        reached = int(self.cursors[run_discovery.name] or 0)
        observations = self.observations()
        out: dict[str, Any] = {
            "ticks": len(ticks), "total_s": round(sum(ticks), 2), "per_tick_ms": [_ms(t) for t in ticks],
            "daemon_share_write_s": round(self.writes.seconds, 2), "daemon_share_write": BATCH_WRITE,
            "write_batches": self.writes.batches, "observations_reported": self.writes.observations,
            "baton_events_read": total, "partitions_reported": self.partitions(), "materializations_written": events,
            "observations_written": observations, "load_average_before": list(load_before),
            "load_average_after": list(os.getloadavg()), "reached_seq": reached, "budget_s": budget_s,
            "asset_events_per_s": round((events + observations) / max(sum(ticks), 1e-9), 1)}
        if reached < total:
            out["stopped_at_budget"] = True
            out["fast_forward"] = self.fast_forward()
        out["partitions"] = self.partitions()
        return out

    def observations(self) -> int:
        """How many observation events the external assets hold (the sensor writes them itself, one by one)."""
        count = 0
        for name in sorted(EXTERNAL_ASSETS):
            cursor = None
            while True:  # Dagster serves at most 10,000 records a call
                page = self.instance.fetch_observations(AssetRecordsFilter(asset_key=AssetKey(name)), limit=10_000,
                                                        cursor=cursor)
                count += len(page.records)
                if not page.has_more:
                    break
                cursor = page.cursor
        return count

    def fast_forward(self) -> dict[str, Any]:
        """Every run a partition in one call and discovery's cursor at the newest event, with no asset events.

        For sizes whose catch-up does not fit the time at hand: the ticks that
        follow read the same Baton store and the same partitions, but Dagster's
        event log holds none of the runs' versions (GraphQL is not measured then).
        """
        os.environ[KEEP_FINISHED_ENV] = str(self.plan.runs * 2)  # as in catch_up: archiving is measured on its own
        with _store(self.home) as (store, _):
            existing = set(self.instance.get_dynamic_partitions(RUNS_PARTITIONS_NAME))
            run_ids = [r.run_id for r in store.list_runs() if r.run_id not in existing]
            newest = _newest_seq(store)
        started = time.perf_counter()
        self.instance.add_dynamic_partitions(RUNS_PARTITIONS_NAME, run_ids)
        elapsed = time.perf_counter() - started
        for sensor in SENSORS:  # where a settled sensor's cursor is: nothing after the newest event
            self.cursors[sensor.name] = str(newest)
        return {"skipped": "fast-forward: partitions added in one call, no asset events reported",
                "add_partitions_s": round(elapsed, 2), "partitions": self.partitions(), "baton_events_read": newest}

    def settle_other_sensors(self) -> None:
        """Bring the job sensors' cursors to the present (their first tick reads the whole log)."""
        for sensor in SENSORS:
            if sensor is not run_discovery:
                while True:
                    before = self.cursors[sensor.name]
                    self.tick(sensor)
                    if self.cursors[sensor.name] == before:
                        break

    def change_round(self, number: int, active: list[str]) -> None:
        """One new candidate on an active run, one new run, one placement's environment changed."""
        with _store(self.home) as (store, blobs):
            add_draft(store, blobs, active[number % len(active)], 100 + number)
            seed_run(store, blobs, self.plan, self.plan.runs + number)
            placement = current_placements(store)[number % len(current_placements(store))]
            update_placement(store, placement.name, runtime_image=f"{placement.environment.runtime_image}-bench{number}",
                             actor="bench", reason="bench: environment change")

    def rounds(self, samples: int, active: list[str]) -> dict[str, Any]:
        """Idle and change rounds: every sensor and the schedule ticked once per round."""
        names = [s.name for s in SENSORS] + [freshness_reverification.name]
        idle: dict[str, list[float]] = {n: [] for n in names}
        change: dict[str, list[float]] = {n: [] for n in names}
        requests: dict[str, list[int]] = {n: [] for n in names}
        for kind, bucket in (("idle", idle), ("change", change)):
            for i in range(samples):
                if kind == "change":
                    self.change_round(i, active)
                for sensor in SENSORS:
                    elapsed, raised, _ = self.tick(sensor)
                    bucket[sensor.name].append(elapsed)
                    if kind == "change":
                        requests[sensor.name].append(raised)
                elapsed, raised = self.schedule_tick()
                bucket[freshness_reverification.name].append(elapsed)
                if kind == "change":
                    requests[freshness_reverification.name].append(raised)
                say(f"sensor ticks ({kind})", i + 1, samples)
        return {name: {"idle": summary(idle[name]), "change": summary(change[name]),
                       "requests_per_change_round": requests[name]} for name in names}

    def reverify_some(self, run_ids: list[str]) -> dict[str, Any]:
        """reverification_job in process for a few partitions (so the runs list is not empty)."""
        job = defs.resolve_job_def("reverification_job")
        took = []
        for i, run_id in enumerate(run_ids):
            started = time.perf_counter()
            result = job.execute_in_process(instance=self.instance, partition_key=run_id,
                                            resources={"baton": self.resource})
            took.append(time.perf_counter() - started)
            if not result.success:
                raise RuntimeError(f"reverification_job failed for {run_id}")
            say("reverification_job", i + 1, len(run_ids))
        return {"runs": len(run_ids), **summary(took)}

    def archive(self, keep_finished: int) -> dict[str, Any]:
        os.environ[KEEP_FINISHED_ENV] = str(keep_finished)
        before = self.partitions()
        elapsed, _, _ = self.tick(run_discovery)
        after = self.partitions()
        with _store(self.home) as (store, _):
            runs = store.list_runs()
            finished = sum(1 for r in runs if r.status != "active")
            kept_history = all(store.list_events(run_id=r.run_id, limit=1) for r in runs)
        return {"keep_finished": keep_finished, "partitions_before": before, "partitions_after": after,
                "archived": before - after, "tick_ms": _ms(elapsed), "baton_runs": len(runs),
                "baton_finished_runs": finished, "history_kept_in_baton_store": kept_history}


def _newest_seq(store: Any) -> int:
    newest = 0
    while batch := store.list_events(after_seq=newest, limit=10_000):
        newest = batch[-1][0]
    return newest


class _store:
    """The Baton store and blobs of a home, closed on exit."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def __enter__(self) -> tuple[Any, Any]:
        self.store = open_store(None, self.home)
        return self.store, open_blobs(self.home, self.store)

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def _timed(url: str, query: str, variables: dict[str, Any], timeout_s: float) -> float:
    started = time.perf_counter()
    graphql(url, query, variables, timeout_s=timeout_s)
    return time.perf_counter() - started


def measure_graphql(url: str, pk: str, samples: int, progress: Callable[[int, int], None],
                    queries: dict[str, str] | None = None, *, timeout_s: float = 300.0) -> dict[str, Any]:
    """Each query once to warm up, then `samples` timed round trips.

    A query whose warm-up takes longer than `timeout_s` is recorded as timed
    out (with that bound) instead of sampled.
    """
    out: dict[str, Any] = {}
    chosen = queries or QUERIES
    total = samples * len(chosen)
    done = 0
    for name, query in chosen.items():
        variables = {"pk": pk} if "$pk" in query else {}
        try:
            _timed(url, query, variables, timeout_s)
        except GraphQLError as exc:
            out[name] = {"n": 0, "error": str(exc)[:500]}
            done += samples
            progress(done, total)
            continue
        except httpx.TimeoutException:
            out[name] = {"n": 0, "timed_out_after_s": timeout_s}
            done += samples
            progress(done, total)
            continue
        took = []
        for _ in range(samples):
            took.append(_timed(url, query, variables, timeout_s))
            done += 1
            progress(done, total)
        out[name] = summary(took)
    return out


def start_webserver(dagster_home: Path, baton_home: Path, logs: Path) -> tuple[ProcessSet, str, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tool = Path(sys.executable).with_name("dagster-webserver")
    procs = ProcessSet(logs)
    procs.start(ServiceSpec("dagster-webserver", [str(tool), "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1",
                                                  "-p", str(port)],
                            env={"DAGSTER_HOME": str(dagster_home), "BATON_HOME": str(baton_home)}, cwd=REPO,
                            probe=lambda: answers(url)))
    try:
        ready = procs.wait_ready(timeout_s=300.0)
    except BaseException:
        procs.stop_all()
        raise
    return procs, url, ready["dagster-webserver"]


REPOSITORIES = "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }"
SET_CURSOR = """
mutation SetCursor($selector: SensorSelector!, $cursor: String) {
  setSensorCursor(sensorSelector: $selector, cursor: $cursor) { __typename ... on PythonError { message } }
}"""
SENSOR_TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) { __typename ... on Sensor {
    sensorState { status ticks(limit: 50) { status timestamp endTimestamp runIds error { message } } } } }
}"""
FINISHED_TICKS = ("SUCCESS", "SKIPPED", "FAILURE")


def _selectors(url: str) -> dict[str, dict[str, str]]:
    """The GraphQL sensor selector of each of the platform's sensors."""
    (repo,) = graphql(url, REPOSITORIES)["repositoriesOrError"]["nodes"]
    return {s.name: {"repositoryLocationName": repo["location"]["name"], "repositoryName": repo["name"],
                     "sensorName": s.name} for s in SENSORS}


def _set_cursor(url: str, selector: dict[str, str], cursor: str | None) -> None:
    answer = graphql(url, SET_CURSOR, {"selector": selector, "cursor": cursor})["setSensorCursor"]
    if answer["__typename"] != "Sensor":
        raise RuntimeError(f"setSensorCursor for {selector['sensorName']} answered {answer}")


def _finished_ticks(url: str, selector: dict[str, str], since: float) -> list[dict[str, Any]]:
    state = graphql(url, SENSOR_TICKS, {"selector": selector})["sensorOrError"]["sensorState"]
    return [t for t in state["ticks"] if t["status"] in FINISHED_TICKS and t["endTimestamp"]
            and t["timestamp"] >= since]


def measure_daemon(url: str, dagster_home: Path, baton_home: Path, cursors: dict[str, str | None], *, ticks: int,
                   budget_s: float, env: dict[str, str], logs: Path) -> dict[str, Any]:
    """The real `dagster-daemon run`, each sensor's cursor first set (GraphQL) to where the bench's ticks left it.

    Tick durations are Dagster's own records (a tick's end minus its start),
    read back over GraphQL, until every sensor has `ticks` finished ticks or
    `budget_s` has passed.
    """
    selectors = _selectors(url)
    for name, selector in selectors.items():
        _set_cursor(url, selector, cursors[name])
    tool = Path(sys.executable).with_name("dagster-daemon")
    procs = ProcessSet(logs)
    since = time.time()
    procs.start(ServiceSpec("dagster-daemon", [str(tool), "run", "-w", str(REPO / "workspace.yaml")],
                            env={"DAGSTER_HOME": str(dagster_home), "BATON_HOME": str(baton_home), **env}, cwd=REPO))
    found: dict[str, list[dict[str, Any]]] = {}
    deadline = time.monotonic() + budget_s
    try:
        while time.monotonic() < deadline:
            found = {name: _finished_ticks(url, selector, since) for name, selector in selectors.items()}
            done = sum(min(len(t), ticks) for t in found.values())
            say("daemon ticks", done, ticks * len(selectors))
            if done == ticks * len(selectors):
                break
            time.sleep(5.0)
    finally:
        procs.stop_all()
    out: dict[str, Any] = {"budget_s": budget_s, "wanted_ticks": ticks}
    for name, records in found.items():
        durations = [t["endTimestamp"] - t["timestamp"] for t in records]
        out[name] = {**(summary(durations) if durations else {"n": 0}),
                     "statuses": sorted(t["status"] for t in records),
                     "runs_requested": sum(len(t["runIds"] or ()) for t in records),
                     "errors": [t["error"]["message"][:300] for t in records if t.get("error")][:3]}
    return out


def _guarded(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A phase's result, or the error that stopped it (the phases after it still run)."""
    try:
        return measure()
    except Exception as exc:  # noqa: BLE001 - recorded in the result, not hidden
        return {"failed": f"{type(exc).__name__}: {str(exc)[:500]}"}


def storage_name(instance: DagsterInstance) -> str:
    """'postgres' or 'sqlite': which storage the instance's event log is on."""
    return "postgres" if "Postgres" in type(instance.event_log_storage).__name__ else "sqlite"


def run(args: argparse.Namespace) -> dict[str, Any]:
    plan = SeedPlan(args.runs, active_share=args.active_share, lapsed_share=args.lapsed_share)
    os.environ["DAGSTER_HOME"] = str(args.dagster_home)
    os.environ["BATON_HOME"] = str(args.baton_home)
    active = [plan.run_id(i) for i in range(plan.runs) if plan.kind_of(i) == "active"]
    if not active:
        raise SystemExit("the seed plan has no active run: raise --active-share")
    result: dict[str, Any] = {"runs": plan.runs, "active_runs": len(active), "complete": False,
                              "lapsed_runs": sum(1 for i in range(plan.runs) if plan.kind_of(i) == "lapsed"),
                              "ticks_only": args.ticks_only, "load_average_start": list(os.getloadavg())}

    def keep() -> None:  # what is measured so far survives a stop
        result["load_average_last"] = list(os.getloadavg())
        args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")

    with DagsterInstance.get() as instance:
        result["dagster_storage"] = storage_name(instance)
        result["dagster_storage_classes"] = sorted({type(instance.run_storage).__name__,
                                                    type(instance.event_log_storage).__name__})
        bench = Bench(args.baton_home, instance, plan)
        result["catch_up"] = bench.fast_forward() if args.ticks_only else bench.catch_up(args.catch_up_budget)
        keep()
        if not args.ticks_only and not result["catch_up"].get("stopped_at_budget"):
            say("settle job sensors")
            bench.settle_other_sensors()  # after a stopped catch-up, fast_forward has set them to the newest event
        result["ticks"] = bench.rounds(args.samples, active)
        keep()
        if args.ticks_only:
            say("archive")
            result["archive"] = bench.archive(args.keep_finished)
            result["complete"] = True
            keep()
            return result
        result["reverification_job"] = bench.reverify_some(active[: args.reverify])
        say("starting dagster-webserver")
        procs, url, ready_s = start_webserver(args.dagster_home, args.baton_home, args.dagster_home / "logs")
        try:
            result["webserver_ready_s"] = ready_s
            result["graphql_timeout_s"] = args.request_timeout
            queries = {**QUERIES, **(SLOW_QUERIES if args.slow_queries else {})}
            result["graphql"] = measure_graphql(url, active[0], args.samples, lambda d, t: say("graphql", d, t),
                                                queries, timeout_s=args.request_timeout)
            keep()
            if args.daemon_ticks:
                say("daemon ticks")
                result["daemon_ticks"] = _guarded(lambda: measure_daemon(
                    url, args.dagster_home, args.baton_home, dict(bench.cursors), ticks=args.daemon_ticks,
                    budget_s=args.daemon_budget, env={KEEP_FINISHED_ENV: str(plan.runs * 2)},
                    logs=args.dagster_home / "logs"))
                keep()
            say("archive")
            result["archive"] = bench.archive(args.keep_finished)
            keep()
            after = {name: queries[name] for name in ("partition_statuses", "asset_catalog")}
            result["graphql_after_archive"] = measure_graphql(url, active[0], args.samples,
                                                              lambda d, t: say("graphql after archive", d, t),
                                                              after, timeout_s=args.request_timeout)
        finally:
            procs.stop_all()
        if any(m.group_alive() for m in procs.services):
            raise RuntimeError("dagster-webserver outlived its stop")
    result["complete"] = True
    keep()
    return result


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baton-home", type=Path, required=True, help="a Baton home seeded by baton bench dagster")
    parser.add_argument("--dagster-home", type=Path, required=True, help="a DAGSTER_HOME holding dagster.yaml")
    parser.add_argument("--runs", type=int, required=True, help="how many runs the seed plan put in the store")
    parser.add_argument("--active-share", type=float, default=0.1)
    parser.add_argument("--lapsed-share", type=float, default=0.01)
    parser.add_argument("--samples", type=int, default=10, help="rounds of ticks, and timed requests per query")
    parser.add_argument("--reverify", type=int, default=3, help="reverification_job runs executed in process")
    parser.add_argument("--keep-finished", type=int, default=200, help="finished runs whose partitions stay")
    parser.add_argument("--ticks-only", action="store_true",
                        help="skip the catch-up (partitions added directly, no asset events), GraphQL and "
                             "reverification_job: ticks and the archive step only")
    parser.add_argument("--request-timeout", type=float, default=300.0,
                        help="seconds a GraphQL query may take before it is recorded as timed out")
    parser.add_argument("--catch-up-budget", type=float, default=None,
                        help="seconds of ticks the catch-up may take; the rest is fast-forwarded (default: no limit)")
    parser.add_argument("--slow-queries", action="store_true",
                        help="also time the stale status of every partition (79 s p50 at 1,000 runs)")
    parser.add_argument("--daemon-ticks", type=int, default=2,
                        help="finished ticks per sensor to read from a real dagster-daemon (0: no daemon)")
    parser.add_argument("--daemon-budget", type=float, default=240.0,
                        help="seconds the daemon may run while its ticks are collected")
    parser.add_argument("--out", type=Path, required=True, help="where the JSON result goes (rewritten per phase)")
    args = parser.parse_args(argv)
    if args.samples < 1 or args.keep_finished < 0 or args.reverify < 0 or args.daemon_ticks < 0:
        parser.error("--samples must be >= 1, --keep-finished, --reverify and --daemon-ticks >= 0")
    if args.daemon_budget <= 0 or (args.catch_up_budget is not None and args.catch_up_budget <= 0):
        parser.error("--daemon-budget and --catch-up-budget must be positive")
    if not (args.dagster_home / "dagster.yaml").is_file():
        parser.error(f"no dagster.yaml in {args.dagster_home}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    run(args)
    say("done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
