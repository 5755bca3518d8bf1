"""Asset checks per run partition, wrapping the plain audits of `baton.platform.run_audit`.

Partitioned asset checks are a preview feature in this Dagster version (they
warn); the verdicts themselves are computed in `baton` and unit-tested there.
"""

from dagster import AssetCheckExecutionContext, AssetCheckResult, AssetCheckSeverity, asset_check

from assets.events import dagster_metadata
from assets.lineage_assets import checkpoints, verifier_evidence
from assets.partitions import runs_partitions
from baton.platform.run_audit import Audit, budget_monotonic, checkpoint_integrity, evidence_bound
from pipelines.resources import BatonResource


def _result(audit: Audit) -> AssetCheckResult:
    return AssetCheckResult(passed=audit.passed, severity=AssetCheckSeverity.ERROR, description=audit.description,
                            metadata=dagster_metadata(audit.metadata))


@asset_check(asset=verifier_evidence, partitions_def=runs_partitions,
             description="The newest evidence verified exactly the current candidate's hash.")
def evidence_bound_to_candidate(context: AssetCheckExecutionContext, baton: BatonResource) -> AssetCheckResult:
    with baton.open() as (store, blobs):
        return _result(evidence_bound(store, blobs, context.partition_key))


@asset_check(asset=checkpoints, partitions_def=runs_partitions,
             description="Every checkpoint hash and every blob the head references verifies.")
def checkpoint_hashes_verify(context: AssetCheckExecutionContext, baton: BatonResource) -> AssetCheckResult:
    with baton.open() as (store, blobs):
        return _result(checkpoint_integrity(store, blobs, context.partition_key))


@asset_check(asset=checkpoints, partitions_def=runs_partitions,
             description="Budget used never decreases along the checkpoint chain.")
def budget_never_decreases(context: AssetCheckExecutionContext, baton: BatonResource) -> AssetCheckResult:
    with baton.open() as (store, blobs):
        return _result(budget_monotonic(store, blobs, context.partition_key))


LINEAGE_CHECKS = [evidence_bound_to_candidate, checkpoint_hashes_verify, budget_never_decreases]
