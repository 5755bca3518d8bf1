"""The per-run lineage assets: observations -> candidates -> verifier_evidence -> checkpoints.

`observations` and `candidates` are external (workers write them; the discovery
sensor reports their versions as observations). `verifier_evidence` and
`checkpoints` are materialized by `reverification_job`: the verifier is re-run on
the run's exact candidate bytes (`baton.platform.reverify`) and the evidence ref
becomes the data version; the checkpoint hash is the checkpoints' data version.
"""


from dagster import AssetExecutionContext, AssetKey, AssetSpec, DataVersion, MaterializeResult, asset

from assets.events import dagster_metadata
from assets.partitions import runs_partitions
from baton.lineage import CHECKPOINTS, VERIFIER_EVIDENCE, latest_versions
from baton.platform.reverify import recorded_evidence, reverify_run
from pipelines.resources import BatonResource

GROUP = "run_lineage"

observations = AssetSpec(
    key=AssetKey("observations"), group_name=GROUP, kinds={"baton"}, partitions_def=runs_partitions,
    description="What a run saw: the head of its hash-linked observation log (data version = log head hash).",
)
candidates = AssetSpec(
    key=AssetKey("candidates"), deps=[observations], group_name=GROUP, kinds={"baton"},
    partitions_def=runs_partitions,
    description="The run's current candidate artifact (data version = its content hash).",
)


@asset(
    deps=[candidates], partitions_def=runs_partitions, group_name=GROUP, kinds={"baton"},
    description="Verifier evidence for the run's current candidate, valid only for that exact hash.",
)
def verifier_evidence(context: AssetExecutionContext, baton: BatonResource) -> MaterializeResult:
    """Re-run the verifier on the exact candidate bytes and record the evidence in Baton's store."""
    run_id = context.partition_key
    with baton.open() as (store, blobs):
        again = recorded_evidence(store, blobs, run_id)
        done = reverify_run(store, blobs, run_id, reason=f"dagster run {context.run.run_id}")
        before = {v.asset: v for v in latest_versions(store, blobs, run_id)}  # the checkpoint's own versions
    context.log.info(f"{run_id}: {done.evidence.result.value} for {done.candidate.artifact_hash}: {done.evidence.detail}")
    parent = again[-1][1] if again else (before[VERIFIER_EVIDENCE].data_version if VERIFIER_EVIDENCE in before else None)
    common = dict(before[CHECKPOINTS].metadata)  # run, release, environment, epoch, boundary, resumability, hashes
    return MaterializeResult(
        data_version=DataVersion(done.evidence_ref),
        metadata=dagster_metadata({
            **common, "candidate_hash": done.candidate.artifact_hash, "result": done.evidence.result.value,
            "verifier_version": done.evidence.verifier_version, "evidence_ref": done.evidence_ref,
            "parent_version": parent, "reverifications": len(again) + 1, "baton_seq": done.seq, "source": "dagster",
        }),
    )


@asset(
    deps=[verifier_evidence], partitions_def=runs_partitions, group_name=GROUP, kinds={"baton"},
    description="The run's newest sealed checkpoint (data version = checkpoint hash).",
)
def checkpoints(context: AssetExecutionContext, baton: BatonResource) -> MaterializeResult:
    run_id = context.partition_key
    with baton.open() as (store, blobs):
        version = next(v for v in latest_versions(store, blobs, run_id) if v.asset == "checkpoints")
    return MaterializeResult(data_version=DataVersion(version.data_version), metadata=dagster_metadata(version.metadata))


LINEAGE_ASSETS = [observations, candidates, verifier_evidence, checkpoints]
