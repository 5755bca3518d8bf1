"""A LangGraph thread as a Baton run: a derived run id, the run's parts, and one sealed checkpoint per save.

Every LangGraph checkpoint is sealed as a Baton checkpoint of the thread's
run (hash-linked to the previous one, at the writer's fencing epoch), whose
run state holds the LangGraph checkpoint's manifest: its ids, versions and the
content ref of every channel value. The event log records the run's creation
and the first seal each saver makes on it (a CHECKPOINT_SEALED event, so the
platform sees the thread as a run with checkpoints); the seals themselves are
the run's checkpoint chain, which lineage reads like any other run's. One event
per save would cost more bytes than the save's own rows.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from decimal import Decimal
from importlib import metadata as importlib_metadata
from typing import Any

from baton import clock
from baton.checkpoints import RunParts, build_checkpoint
from baton.errors import StoreError
from baton.identity import hex_of, sha256_ref
from baton.models import (
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    BudgetLimits,
    EnvironmentIdentity,
    Event,
    EventType,
    ExecutionCheckpoint,
    OperationLedger,
    Placement,
    PortableRunState,
    ResumabilityClass,
    RunKind,
)
from baton.schema_versions import readable_versions
from baton.store.base import SqlStore
from baton.store.core import Tx
from baton.store.sql_blobs import SqlBlobStore
from baton.store.staging import StagedBlobs

MANIFEST_KEY = "langgraph"
_NO_DEADLINE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
_RESUME_REASON = "a LangGraph checkpoint: the thread resumes with graph.invoke(None, config)"


def run_id_for(thread_id: str) -> str:
    """The Baton run of a LangGraph thread: stable, and a valid run id whatever the thread id holds."""
    return "langgraph-" + hex_of(sha256_ref(thread_id.encode("utf-8")))[:32]


def _version(package: str) -> str:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


def default_parts(placement_name: str = "langgraph-local") -> RunParts:
    """The parts of a thread's run: a LangGraph graph on a local placement, no authority beyond observing."""
    release = BehavioralRelease(
        model="langgraph-graph",
        prompt_bundle="langgraph",
        router_policy="langgraph-pregel",
        tool_contract="langgraph",
        memory_schema="langgraph-checkpoint",
        verifier_bundle="none",
    )
    environment = EnvironmentIdentity(
        placement=placement_name,
        region="local",
        provider="local",
        runtime_image=f"python:{sys.version_info.major}.{sys.version_info.minor}",
        tool_versions={"langgraph": _version("langgraph"), "langgraph-checkpoint": _version("langgraph-checkpoint")},
    )
    return RunParts(
        run_kind=RunKind.PLANNING,
        release=release,
        placement=Placement(
            name=placement_name,
            region="local",
            provider="local",
            authority_ceiling=AuthorityLevel.OBSERVE,
            supported_release_ids=(release.release_id,),
            readable_schema_versions=readable_versions(),
            verifiers=(release.verifier_bundle,),
            tools=(release.tool_contract,),
            environment=environment,
        ),
        state=PortableRunState(task="langgraph thread"),
        operations=OperationLedger(),
        authority=AuthorityContext(level=AuthorityLevel.OBSERVE, policy_id="langgraph-checkpointer"),
        budget=BudgetLedger(
            limits=BudgetLimits(
                model_spend_usd=Decimal("0"),
                model_calls=0,
                search_expansions=0,
                tool_calls=0,
                browser_seconds=0,
                sandbox_seconds=0,
                verification_reserve_usd=Decimal("0"),
                retries=0,
                deadline=_NO_DEADLINE,
            )
        ),
    )


def ensure_run(store: SqlStore, thread_id: str, parts: RunParts) -> str:
    """Create the thread's run if it is not in the store yet; return its id."""
    run_id = run_id_for(thread_id)
    try:
        store.get_run(run_id)
        return run_id
    except StoreError:
        pass
    try:
        store.create_run(run_id, parts.run_kind, parts.release.release_id, parts.placement.name,
                         {"langgraph_thread_id": thread_id, "source": "langgraph"})
    except StoreError:
        store.get_run(run_id)  # another writer created it first; anything else is a real error
        return run_id
    store.append_event(Event(event_type=EventType.RUN_CREATED, run_id=run_id, at=store.db_now(),
                             release_id=parts.release.release_id, target_placement=parts.placement.name,
                             reason="LangGraph thread first checkpointed",
                             detail={"langgraph_thread_id": thread_id}))
    return run_id


def manifest_state(manifest: Mapping[str, Any], step: int) -> PortableRunState:
    """The run state that carries one LangGraph checkpoint's manifest."""
    return PortableRunState(task="langgraph thread", step=step, memory={MANIFEST_KEY: dict(manifest)})


def seal(
    store: SqlStore,
    blobs: SqlBlobStore,
    *,
    run_id: str,
    parts: RunParts,
    parent: ExecutionCheckpoint | None,
    state: PortableRunState,
    epoch: int,
    extra_blobs: Mapping[str, bytes],
    within: Callable[[ExecutionCheckpoint, str, Tx], None],
    detail: Mapping[str, Any],
    announce: str | None = None,
    scan_parts: bool = True,
) -> ExecutionCheckpoint:
    """Seal the run's next checkpoint around `state`; `within(checkpoint, state_ref, tx)` adds the adapter's rows.

    Everything (new blobs, the checkpoint row, the adapter's rows and, with
    `announce`, a CHECKPOINT_SEALED event giving that reason) commits in one
    transaction, after the store checked the epoch under the lease row's lock:
    a fenced writer leaves nothing behind.
    """
    staged = StagedBlobs(blobs)
    staged.put_many({ref: data for ref, data in extra_blobs.items() if ref not in blobs.stored_hint([ref])})
    now = clock.now()
    checkpoint = build_checkpoint(
        staged,
        run_id=run_id,
        parts=replace(parts, state=state),
        new_observations=(),
        parent=parent,
        boundary=Boundary.GENERATING,
        resumability=ResumabilityClass.R2,
        resumability_reasons=(_RESUME_REASON,),
        owner_epoch=epoch,
        sealed_at=now,
        scan_secrets=scan_parts,
    )
    events = []
    if announce:
        events.append(Event(
            event_type=EventType.CHECKPOINT_SEALED, run_id=run_id, at=now, checkpoint_id=checkpoint.checkpoint_id,
            release_id=checkpoint.release_id, state_schema=checkpoint.schema_version,
            resume_boundary=Boundary.GENERATING.value, source_epoch=epoch, reason=announce,
            detail={"checkpoint_hash": checkpoint.checkpoint_hash, **detail},
        ))
    state_ref = checkpoint.task_state_ref
    store.append_checkpoint(checkpoint, blobs=staged.pending, within=lambda tx: within(checkpoint, state_ref, tx),
                            events=events)
    blobs.mark_stored(staged.pending)
    return checkpoint
