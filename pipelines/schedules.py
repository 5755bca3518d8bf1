"""Scheduled re-verification of runs whose evidence or input observations lapsed (computed from Baton's store)."""

from dagster import DefaultScheduleStatus, RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from baton.platform.freshness import runs_due_for_reverification
from pipelines.jobs import reverification_job
from pipelines.resources import BatonResource


@schedule(job=reverification_job, cron_schedule="*/5 * * * *", default_status=DefaultScheduleStatus.RUNNING,
          description="Every 5 minutes: re-verify runs whose evidence freshness lapsed (not stale_assets_only).")
def freshness_reverification(context: ScheduleEvaluationContext, baton: BatonResource):  # type: ignore[no-untyped-def]
    with baton.open() as (store, blobs):
        due = runs_due_for_reverification(store, blobs)
    if not due:
        return SkipReason("no run's evidence or observations lapsed")
    tick = context.scheduled_execution_time.isoformat()
    return [RunRequest(run_key=f"freshness:{d.run_id}:{d.checkpoint_hash}:{tick}", partition_key=d.run_id,
                       tags={"baton/run": d.run_id, "baton/reason": d.reason}) for d in due]
