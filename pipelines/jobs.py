"""`handoff_job` (one run moved through the fleet's dispatch) and `reverification_job` (per run partition)."""


from dagster import AssetSelection, Config, Failure, MetadataValue, OpExecutionContext, define_asset_job, job, op

from assets.partitions import runs_partitions
from baton.catalog.changes import current_placements
from baton.handoff.coordinator import HandoffRequest
from baton.handoff.dispatch import run_handoff
from pipelines.resources import BatonResource

reverification_job = define_asset_job(
    "reverification_job", selection=AssetSelection.assets("verifier_evidence", "checkpoints"),  # their checks come along
    partitions_def=runs_partitions,
    description="Re-verify one run: the verifier on its exact candidate bytes; materializes evidence and checkpoints.",
)


class HandoffConfig(Config):  # type: ignore[misc]
    run: str
    reason: str
    target: str = ""
    source_alive: bool = True
    allow_same_placement: bool = False
    excluded_placements: list[str] = []


@op
def hand_off(context: OpExecutionContext, config: HandoffConfig, baton: BatonResource) -> None:
    """Move the run through `baton.handoff.dispatch.run_handoff`; an aborted move fails the Dagster run."""
    request = HandoffRequest(
        run_id=config.run, reason=config.reason, preferred_targets=(config.target,) if config.target else (),
        excluded_placements=tuple(config.excluded_placements), source_alive=config.source_alive,
        allow_same_placement=config.allow_same_placement,
    )
    with baton.open() as (store, blobs):
        outcome = run_handoff(store, blobs, baton.home_path(), current_placements(store), request)
    decision = outcome.decision.model_dump(mode="json") if outcome.decision is not None else None
    metadata = {"run": MetadataValue.text(outcome.run_id), "status": MetadataValue.text(outcome.status.value),
                "source": MetadataValue.text(outcome.source_placement or ""),
                "target": MetadataValue.text(outcome.target_placement or ""),
                "decision": MetadataValue.json(decision or {})}
    context.log.info(f"handoff of {outcome.run_id}: {outcome.status.value}; gate decision: {decision}")
    if not outcome.committed:
        raise Failure(description=f"handoff of {outcome.run_id} aborted: {outcome.abort_reason}", metadata=metadata)
    context.log.info(f"committed: {outcome.source_placement} -> {outcome.target_placement}, "
                     f"epoch {outcome.source_epoch} -> {outcome.target_epoch}")


@job(description="Hand one run off through the same dispatch the fleet uses (config: run, reason, optional target).")
def handoff_job() -> None:
    hand_off()
