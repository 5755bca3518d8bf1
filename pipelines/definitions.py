"""The single Dagster ``Definitions`` for Baton, loaded by ``workspace.yaml``.

Empty for now: assets, jobs, sensors and schedules are added here as the
packages ``assets``, ``sensors`` and ``pipelines`` gain them.
"""

from dagster import Definitions

defs = Definitions(
    assets=[],
    jobs=[],
    sensors=[],
    schedules=[],
)
