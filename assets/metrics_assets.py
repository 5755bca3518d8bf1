"""The ops metrics (sec. 25) as one Dagster asset: a DuckDB file the Streamlit dashboard reads."""

from dagster import (
    AssetExecutionContext,
    AssetSelection,
    DefaultScheduleStatus,
    MaterializeResult,
    MetadataValue,
    ScheduleDefinition,
    asset,
    define_asset_job,
)

from baton.metrics.export import analytics_path, export_metrics
from baton.metrics.links import dashboard_url
from baton.metrics.target_effects import target_effects
from pipelines.resources import BatonResource


@asset(group_name="ops", description="Handoff-quality metrics and verified success with/without handoff, "
                                     "from Baton's event log and the targets' own records (DuckDB); each "
                                     "export keeps the earlier snapshots (the trend). Shown on the ops dashboard "
                                     "(metadata `dashboard`).")
def handoff_metrics(context: AssetExecutionContext, baton: BatonResource) -> MaterializeResult:
    home = baton.home_path()
    path = analytics_path(home)
    with baton.open() as (store, _blobs):
        counts = export_metrics(store, target_effects(home), path)
    context.log.info(f"wrote {path}: {counts}")
    return MaterializeResult(metadata={"path": MetadataValue.path(str(path)),
                                       "dashboard": MetadataValue.url(dashboard_url()),
                                       **{f"rows/{table}": n for table, n in counts.items()}})


metrics_job = define_asset_job("metrics_job", selection=AssetSelection.assets(handoff_metrics))

metrics_refresh = ScheduleDefinition(job=metrics_job, cron_schedule="* * * * *",
                                     default_status=DefaultScheduleStatus.RUNNING,
                                     description="Every minute: recompute the ops metrics for the dashboard.")
