"""The freshness schedule at the Dagster level, for a lapsed freshness budget.

Verified runs in a real Baton store: one whose documents have an hour of
freshness budget (nothing lapsed: the schedule skips), then one with a second.
Once the short budget lapsed by the database clock: exactly one `reverification_job`
request, for that run's partition. The request executed in process (on the
same persistent instance) records new evidence, and the next tick skips again.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from dagster import DagsterInstance, RunRequest, SkipReason, build_schedule_context, instance_for_test

from assets.partitions import RUNS_PARTITIONS_NAME
from baton.models import EventType
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from builders.live import wait_for
from pipelines.definitions import defs
from pipelines.resources import BatonResource
from pipelines.schedules import freshness_reverification

from .platform_support import ResearchRun

AT = dt.datetime(2026, 12, 2, 1, 0, tzinfo=dt.UTC)


def _evaluate(instance: DagsterInstance, home: Path, at: dt.datetime) -> list[RunRequest] | SkipReason:
    context = build_schedule_context(instance=instance, scheduled_execution_time=at,
                                     resources={"baton": BatonResource(home=str(home))})
    return freshness_reverification(context)  # type: ignore[no-any-return]


def test_a_lapsed_budget_raises_exactly_its_runs_reverification(home: Path, store: SqlStore, blobs: BlobStore) -> None:
    with instance_for_test() as instance:
        long = ResearchRun.launch(store, blobs, freshness_s=3600.0)
        long.draft()
        long.verify()
        skipped = _evaluate(instance, home, AT)
        assert isinstance(skipped, SkipReason), skipped  # a verified run, nothing lapsed

        short = ResearchRun.launch(store, blobs, freshness_s=1.0)
        short.draft()
        short.verify()
        lapses_at = max(o.expires_at for o in short.observations)
        wait_for(lambda: store.db_now() > lapses_at, timeout_s=30.0, what="the short freshness budget to lapse")
        requests = _evaluate(instance, home, AT + dt.timedelta(minutes=5))
        assert isinstance(requests, list), requests
        (request,) = requests
        assert request.partition_key == short.run_id
        assert request.tags == {"baton/run": short.run_id,
                                "baton/reason": "an input observation's freshness lapsed after the evidence"}
        assert request.run_key is not None and short.head.checkpoint_hash in request.run_key

        instance.add_dynamic_partitions(RUNS_PARTITIONS_NAME, [long.run_id, short.run_id])  # as discovery does
        job = defs.resolve_job_def("reverification_job")
        result = job.execute_in_process(instance=instance, partition_key=request.partition_key, tags=request.tags,
                                        resources={"baton": BatonResource(home=str(home))})
        assert result.success
        recorded = store.list_events(run_id=short.run_id, event_types=[EventType.EVIDENCE_RECORDED])
        assert len(recorded) == 1
        assert recorded[0][1].at > lapses_at
        assert store.list_events(run_id=long.run_id, event_types=[EventType.EVIDENCE_RECORDED]) == []

        again = _evaluate(instance, home, AT + dt.timedelta(minutes=10))
        assert isinstance(again, SkipReason), again
