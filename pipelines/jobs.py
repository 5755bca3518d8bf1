"""`handoff_job` (one run moved through the fleet's dispatch) and `reverification_job` (per run partition)."""


from dagster import (
    AssetSelection,
    Config,
    Failure,
    MetadataValue,
    OpExecutionContext,
    define_asset_job,
    in_process_executor,
    job,
    op,
)

from assets.partitions import runs_partitions
from baton.catalog.changes import current_placements
from baton.handoff.coordinator import HandoffRequest
from baton.handoff.recovery import Stage, recover
from baton.runtime.dispatch import run_handoff
from baton.platform.handoff_report import gate_refusals
from pipelines.resources import BatonResource

reverification_job = define_asset_job(
    "reverification_job", selection=AssetSelection.assets("verifier_evidence", "checkpoints"),  # their checks come along
    partitions_def=runs_partitions,
    description="Re-verify one run: the verifier on its exact candidate bytes; materializes evidence and checkpoints.",
)


RUN_TAG = "baton/run"
REASON_TAG = "baton/reason"


class HandoffConfig(Config):  # type: ignore[misc]
    run: str
    reason: str
    target: str = ""
    source_alive: bool = True
    allow_same_placement: bool = False
    excluded_placements: list[str] = []


@op
def hand_off(context: OpExecutionContext, config: HandoffConfig, baton: BatonResource) -> None:
    """Move the run through `baton.runtime.dispatch.run_handoff`; an aborted move fails the Dagster run."""
    # Launched by hand too, the Dagster run names the Baton run it moved (sensor requests carry the same tag).
    context.instance.add_run_tags(context.run_id, {RUN_TAG: config.run, REASON_TAG: config.reason})
    request = HandoffRequest(
        run_id=config.run, reason=config.reason, preferred_targets=(config.target,) if config.target else (),
        excluded_placements=tuple(config.excluded_placements), source_alive=config.source_alive,
        allow_same_placement=config.allow_same_placement,
    )
    with baton.open() as (store, blobs):
        # A request of this run that a dead coordinator left unanswered is undone first (`baton recover`'s
        # function); a lapsed adopter or reservation is finished by this handoff itself.
        for done in recover(store, run_ids=[config.run], recovered_by=f"dagster:{context.run_id}",
                            stages=(Stage.PREPARED,)):
            context.log.info(f"recovered {done.move.run_id} ({done.move.stage.value}): {done.action.value}, {done.detail}")
        outcome = run_handoff(store, blobs, baton.home_path(), current_placements(store), request)
    decision = outcome.decision.model_dump(mode="json") if outcome.decision is not None else None
    metadata = {"run": MetadataValue.text(outcome.run_id), "status": MetadataValue.text(outcome.status.value),
                "source": MetadataValue.text(outcome.source_placement or ""),
                "target": MetadataValue.text(outcome.target_placement or ""),
                "decision": MetadataValue.json(decision or {})}
    context.log.info(f"handoff of {outcome.run_id}: {outcome.status.value}; gate decision: {decision}")
    if not outcome.committed:
        with baton.open() as (store, _):
            refusals = gate_refusals(store, outcome.run_id)  # the gate's reasons per target, from Baton's log
        metadata["gate_refusals"] = MetadataValue.json(refusals)
        gate = "; ".join(f"{target}: {', '.join(reasons)}" for target, reasons in sorted(refusals.items()))
        context.log.error(f"handoff of {outcome.run_id} aborted: {outcome.abort_reason}; gate refusals: {gate or 'none'}")
        raise Failure(description=f"handoff of {outcome.run_id} aborted: {outcome.abort_reason}"
                                  + (f" (gate: {gate})" if gate else ""), metadata=metadata)
    context.add_output_metadata(metadata)
    context.log.info(f"committed: {outcome.source_placement} -> {outcome.target_placement}, "
                     f"epoch {outcome.source_epoch} -> {outcome.target_epoch}")


# One op that waits on the store: a step subprocess (the default multiprocess executor) would only add a Python
# start-up to the failover path (docs/benchmarks.md §4).
@job(description="Hand one run off through the same dispatch the fleet uses (config: run, reason, optional target).",
     executor_def=in_process_executor)
def handoff_job() -> None:
    hand_off()
