"""The one partitioning of Baton's per-run assets: a dynamic partition per agent run."""

from dagster import DynamicPartitionsDefinition

RUNS_PARTITIONS_NAME = "runs"

runs_partitions = DynamicPartitionsDefinition(name=RUNS_PARTITIONS_NAME)
"""One key per agent run id; the discovery sensor adds keys as runs appear in Baton's store."""
