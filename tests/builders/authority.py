"""Approvals, capabilities and gateway requests for a lease holder (the ownership tests and their worker processes)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from baton.authority import AuthorityService, Capability
from baton.gateway import MutationRequest
from baton.identity import ref_of
from baton.models import Approval, AuthorityContext, AuthorityLevel, RunKind
from baton.store.base import SqlStore
from baton.store.records import Lease

from builders import rows
from builders.records import placement

ARTIFACT = ref_of({"artifact": "patch-P"})
OTHER_ARTIFACT = ref_of({"artifact": "patch-Q"})
OPERATION = "deploy"
TARGET = "ledger"


def new_run(store: SqlStore) -> str:
    """A new deploy run; its id."""
    return rows.new_run(store, kind=RunKind.DEPLOY).run_id


def approval(
    now: dt.datetime,
    *,
    operation: str = OPERATION,
    artifact: str = ARTIFACT,
    level: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE,
    valid_s: float = 3600.0,
) -> Approval:
    return Approval(
        approval_id=f"appr-{uuid.uuid4().hex[:8]}",
        operation=operation,
        artifact_hash=artifact,
        level=level,
        approved_by="release-manager",
        expires_at=now + dt.timedelta(seconds=valid_s),
    )


def context(now: dt.datetime, level: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE, **approval_args: Any) -> AuthorityContext:
    return AuthorityContext(level=level, policy_id="policy-7", approvals=(approval(now, **approval_args),))


def capability(
    authority: AuthorityService,
    store: SqlStore,
    lease: Lease,
    *,
    operation: str = OPERATION,
    artifact: str = ARTIFACT,
    level: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE,
    ttl_s: float | None = None,
) -> Capability:
    """A capability issued from policy for the holder of `lease`."""
    now = store.db_now()
    return authority.issue(
        run_id=lease.run_id,
        epoch=lease.epoch,
        operation=operation,
        artifact_hash=artifact,
        level=level,
        lease=lease,
        placement=placement(),
        context=context(now, operation=operation, artifact=artifact),
        now=now,
        ttl_s=ttl_s,
    )


def request(
    lease_or_run: Lease | tuple[str, int],
    cap: Capability | str,
    key: str,
    payload: dict[str, Any],
    *,
    process: str = "worker",
    operation: str = OPERATION,
    artifact: str = ARTIFACT,
) -> MutationRequest:
    run_id, epoch = (lease_or_run.run_id, lease_or_run.epoch) if isinstance(lease_or_run, Lease) else lease_or_run
    return MutationRequest(
        run_id=run_id,
        epoch=epoch,
        operation=operation,
        idempotency_key=key,
        target=TARGET,
        payload=payload,
        artifact_hash=artifact,
        capability=cap if isinstance(cap, str) else cap.token,
        process=process,
    )
