"""The single Dagster ``Definitions`` for Baton, loaded by ``workspace.yaml``.

Start it with ``make dagster-dev`` (or ``DAGSTER_HOME=<dir with dagster.yaml>
dagster dev -w workspace.yaml``; webserver and daemon alone: ``dagster-webserver
-w workspace.yaml`` and ``dagster-daemon run -w workspace.yaml``). Baton's state
comes from BATON_HOME / BATON_DATABASE_URL in the environment of those
processes. Sensors and the schedule run by default once the daemon is up.
"""

from dagster import Definitions

from assets.experiment_assets import experiment_comparison
from assets.lineage_assets import LINEAGE_ASSETS
from assets.lineage_checks import LINEAGE_CHECKS
from assets.metrics_assets import handoff_metrics, metrics_job, metrics_refresh
from pipelines.jobs import handoff_job, reverification_job
from pipelines.resources import BatonResource
from pipelines.schedules import freshness_reverification
from sensors.baton_sensors import SENSORS

defs = Definitions(
    assets=[*LINEAGE_ASSETS, handoff_metrics, experiment_comparison],
    asset_checks=LINEAGE_CHECKS,
    jobs=[handoff_job, reverification_job, metrics_job],
    sensors=SENSORS,
    schedules=[freshness_reverification, metrics_refresh],
    resources={"baton": BatonResource()},
)
