"""Store rows with stand-in refs (runs, checkpoints, events, ledger entries), and a transaction counter.

The refs here point at nothing: these rows exercise the store itself, not restore.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from baton.identity import ref_of
from baton.models import (
    Boundary,
    Event,
    EventType,
    ExecutionCheckpoint,
    OperationEntry,
    OperationState,
    ResumabilityClass,
    RunKind,
    checkpoint_id_for,
)
from baton.store.base import SqlStore
from baton.store.core import StoreCore
from baton.store.records import RunRecord

from builders.records import T0

RELEASE = ref_of({"release": "m-v7"})


def new_run(store: SqlStore, run_id: str | None = None, kind: RunKind = RunKind.CODING) -> RunRecord:
    return store.create_run(run_id or f"run-{uuid.uuid4().hex[:12]}", kind, RELEASE, "eu-1")


def checkpoint(
    run_id: str,
    seq: int = 0,
    parent: ExecutionCheckpoint | None = None,
    *,
    boundary: Boundary = Boundary.CANDIDATE_READY,
    owner_epoch: int = 0,
    note: str = "",
) -> ExecutionCheckpoint:
    """A sealed checkpoint; `note` varies the content (and so the hash)."""

    def ref(part: str) -> str:
        return ref_of({"run": run_id, "seq": seq, "part": part, "note": note})

    return ExecutionCheckpoint.seal(
        run_id=run_id,
        checkpoint_id=checkpoint_id_for(run_id, seq),
        seq=seq,
        parent_checkpoint_id=None if parent is None else parent.checkpoint_id,
        parent_checkpoint_hash=None if parent is None else parent.checkpoint_hash,
        run_kind=RunKind.CODING,
        release_id=RELEASE,
        environment_id=ref("environment"),
        placement_ref=ref("placement"),
        task_state_ref=ref("task"),
        observation_manifest_ref=ref("observations"),
        candidate_manifest_ref=ref("candidates"),
        verifier_evidence_ref=ref("evidence"),
        operation_ledger_ref=ref("operations"),
        authority_context_ref=ref("authority"),
        budget_ledger_ref=ref("budget"),
        owner_epoch=owner_epoch,
        boundary=boundary,
        resumability=ResumabilityClass.R2,
        sealed_at=T0 + dt.timedelta(seconds=seq),
    )


def chain(run_id: str, length: int) -> list[ExecutionCheckpoint]:
    out: list[ExecutionCheckpoint] = []
    for seq in range(length):
        out.append(checkpoint(run_id, seq, out[-1] if out else None))
    return out


def event(run_id: str, event_type: EventType = EventType.RUN_CREATED, **fields: object) -> Event:
    return Event(event_type=event_type, run_id=run_id, at=T0, **fields)  # type: ignore[arg-type]


def entry(
    run_id: str,
    key: str = "deploy-1",
    epoch: int = 0,
    *,
    payload: str = "payload-a",
    operation_id: str | None = None,
    state: OperationState = OperationState.PREPARED,
) -> OperationEntry:
    return OperationEntry(
        operation_id=operation_id or f"op-{uuid.uuid4().hex[:12]}",
        run_id=run_id,
        idempotency_key=key,
        epoch=epoch,
        kind="deploy",
        target="http://deploy.local/api",
        payload_ref=ref_of({"payload": payload}),
        state=state,
        recorded_at=T0,
    )


@contextmanager
def counted_transactions() -> Iterator[list[bool]]:
    """Every store transaction opened while installed, as its `write` flag."""
    opened: list[bool] = []
    original = StoreCore._tx

    @contextmanager
    def tx(store: StoreCore, write: bool = True) -> Iterator[object]:
        opened.append(write)
        with original(store, write) as handle:
            yield handle

    with mock.patch.object(StoreCore, "_tx", tx):
        yield opened
