"""Baton legs: one sealed checkpoint per step over an append-only observation log.

Each step does what a worker does at a semantic boundary: describe the
observed content with an `Observation` record (whose `content_ref` is the
content's hash), advance the run state's step counter, and seal a checkpoint
whose parent is the previous one with `seal_checkpoint` (secret scanning on, as
in production), which stores the content and the new parts and records the
checkpoint. The step is timed from the new observation to the committed
checkpoint row.

Three blob backends are measured: the default (`open_blobs(home, store)`:
small blobs in the SQL store's blob table, committed in the checkpoint's
transaction, large artifacts as files), files under BATON_HOME for every blob
(BATON_BLOBS=files, the default before issue 16) and the blob table for every
blob (BATON_BLOBS=sql).

Bytes stored are the SQL store (the SQLite file after its WAL is folded back,
or the PostgreSQL database's growth, measured by the runner) plus the blob
files, if any.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

from baton.bench.leg import LegInput, LegOutput
from baton.bench.measure import Footprint, StepClock, files_footprint, sqlite_footprint, tree_footprint
from baton.checkpoints import RunParts, seal_checkpoint
from baton.identity import sha256_ref
from baton.models import (
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    BudgetLimits,
    EnvironmentIdentity,
    ExecutionCheckpoint,
    Observation,
    OperationLedger,
    Placement,
    PortableRunState,
    ResumabilityClass,
    RunKind,
    SourceAuthority,
)
from baton.store.base import SqlStore
from baton.store.blobs import Blobs, BlobStore

RUN_ID = "bench-checkpoint-run"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _release() -> BehavioralRelease:
    return BehavioralRelease(
        model="bench-model-1",
        prompt_bundle="bench-prompts-1",
        router_policy="bench-router-1",
        tool_contract="bench-tools-1",
        memory_schema="bench-memory-1",
        verifier_bundle="bench-verifier-1",
    )


def initial_parts() -> RunParts:
    """The run's parts before its first step: a research run on a local placement."""
    release = _release()
    return RunParts(
        run_kind=RunKind.RESEARCH,
        release=release,
        placement=Placement(
            name="bench-local",
            region="local",
            provider="local",
            authority_ceiling=AuthorityLevel.VERIFY,
            supported_release_ids=(release.release_id,),
            readable_schema_versions=("3",),
            environment=EnvironmentIdentity(
                placement="bench-local", region="local", provider="local", runtime_image="python:3.11"
            ),
        ),
        state=PortableRunState(task="accumulate one observation per step"),
        operations=OperationLedger(),
        authority=AuthorityContext(level=AuthorityLevel.OBSERVE, policy_id="bench-policy"),
        budget=BudgetLedger(
            limits=BudgetLimits(
                model_spend_usd=Decimal("10"),
                model_calls=10_000,
                search_expansions=10_000,
                tool_calls=10_000,
                browser_seconds=0,
                sandbox_seconds=0,
                verification_reserve_usd=Decimal("1"),
                retries=3,
                deadline=T0 + dt.timedelta(days=1),
            )
        ),
    )


def _run(store: SqlStore, blobs: Blobs, observations: Sequence[str]) -> tuple[float, ...]:
    parts = initial_parts()
    store.create_run(RUN_ID, parts.run_kind, parts.release.release_id, parts.placement.name, {"bench": "checkpoint"})
    clock = StepClock()
    parent: ExecutionCheckpoint | None = None
    checkpoint: ExecutionCheckpoint | None = None
    for index, text in enumerate(observations):
        at = T0 + dt.timedelta(seconds=index)
        with clock.time_step():
            content = text.encode("ascii")
            observation = Observation(
                source="bench://trajectory",
                query={"step": index},
                observed_at=at,
                content_ref=sha256_ref(content),
                freshness_budget_s=3600,
                authority=SourceAuthority.AUTHORITATIVE,
            )
            parts = replace(parts, state=parts.state.model_copy(update={"step": index + 1}))
            checkpoint = seal_checkpoint(
                store,
                blobs,
                contents=(content,),
                run_id=RUN_ID,
                parts=parts,
                new_observations=(observation,),
                parent=parent,
                boundary=Boundary.GENERATING,
                resumability=ResumabilityClass.R3,
                resumability_reasons=("recorded observations can be reused",),
                owner_epoch=0,
                sealed_at=at,
                scan_secrets=True,
            )
        parent = checkpoint
    latest = store.latest_checkpoint(RUN_ID)
    if checkpoint is None or latest is None or latest.checkpoint_hash != checkpoint.checkpoint_hash:
        raise RuntimeError("Baton's latest checkpoint is not the last one sealed")
    return tuple(clock.seconds)


def _sqlite_files(home: Path, blob_root: Path) -> Footprint:
    """Every SQLite database under `home` outside the blob store, WAL folded in."""
    total = Footprint(0, 0)
    for path in sorted(home.rglob("*")):
        if not path.is_file() or blob_root in path.parents or path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        with path.open("rb") as handle:
            is_sqlite = handle.read(16) == b"SQLite format 3\x00"
        total = total + (sqlite_footprint(path) if is_sqlite else files_footprint([path]))
    return total


def _leg(inp: LegInput, *, blobs_kind: str) -> LegOutput:
    from baton.store.factory import open_blobs, open_store
    from baton.store.sql_blobs import SqlBlobStore

    home = inp.workdir / "baton_home"
    home.mkdir()
    blob_root = home / "blobs"
    store = open_store(inp.database_url, home)
    try:
        blobs: Blobs
        if blobs_kind == "default":
            blobs = open_blobs(home, store)
        else:
            blobs = SqlBlobStore(store) if blobs_kind == "sql" else BlobStore(blob_root)
        seconds = _run(store, blobs, inp.observations)
    finally:
        store.close()
    components = {"blobs": tree_footprint(blob_root)} if blob_root.exists() else {}
    if inp.database_url is None:
        components["sqlite"] = _sqlite_files(home, blob_root)
    return LegOutput(step_seconds=seconds, components=components)


def default_blobs_leg(inp: LegInput) -> LegOutput:
    """The default blob backend (`open_blobs(home, store)`: small blobs in the SQL store, large ones as files)."""
    return _leg(inp, blobs_kind="default")


def file_blobs_leg(inp: LegInput) -> LegOutput:
    """Blobs as files under BATON_HOME (BATON_BLOBS=files; the default before issue 16), the row in the SQL store."""
    return _leg(inp, blobs_kind="files")


def sql_blobs_leg(inp: LegInput) -> LegOutput:
    """Blobs in the SQL store's blob table, committed in the checkpoint's transaction (BATON_BLOBS=sql)."""
    return _leg(inp, blobs_kind="sql")
