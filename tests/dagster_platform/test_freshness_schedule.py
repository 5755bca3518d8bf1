"""The freshness schedule over a real store: due runs become reverification_job partitions, then none."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from dagster import RunRequest, SkipReason, build_schedule_context, instance_for_test

from baton.platform.reverify import reverify_run
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from pipelines.resources import BatonResource
from pipelines.schedules import freshness_reverification

from .platform_support import ResearchRun


def _evaluate(home: Path, at: dt.datetime) -> list[RunRequest] | SkipReason:
    with instance_for_test() as instance:
        context = build_schedule_context(instance=instance, scheduled_execution_time=at,
                                         resources={"baton": BatonResource(home=str(home))})
        return freshness_reverification(context)  # type: ignore[no-any-return]


def test_schedule_requests_the_runs_whose_evidence_no_longer_binds(home: Path, store: SqlStore,
                                                                   blobs: BlobStore) -> None:
    due, settled = ResearchRun.launch(store, blobs), ResearchRun.launch(store, blobs)
    for run in (due, settled):
        run.draft()
        run.verify()
    at = dt.datetime(2026, 12, 1, 23, 35, tzinfo=dt.UTC)
    assert isinstance(_evaluate(home, at), SkipReason)
    due.draft()
    requests = _evaluate(home, at)
    assert isinstance(requests, list)
    (request,) = requests
    assert request.partition_key == due.run_id and request.job_name in (None, "reverification_job")
    assert request.tags["baton/run"] == due.run_id
    assert request.run_key is not None and due.head.checkpoint_hash in request.run_key
    reverify_run(store, blobs, due.run_id)
    assert isinstance(_evaluate(home, at + dt.timedelta(minutes=5)), SkipReason)
